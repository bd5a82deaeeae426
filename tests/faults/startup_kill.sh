#!/usr/bin/env bash
# startup_kill.sh PROGRAM MPIEXEC [RUNS] [NP]
# Kills one rank (SIGKILL, a random one) at RUNS random moments of start-up of PROGRAM
# (crown-info) under `MPIEXEC -np NP`, and checks after each job that /dev/shm holds
# nothing of Crown's: no name containing "crown", and no bytes in use beyond the files
# still listed (Open MPI's own segments). The jobs run in a private mount namespace with
# a fresh tmpfs on /dev/shm, so other jobs on the machine neither disturb nor are seen.
# The moments are uniform over the span from the ranks' appearance to the end of the
# shortest of three undisturbed runs (measured first); CROWN_KILL_SEED repeats them.
# First, a heap too large for /dev/shm must fail at start-up with a config_error, and a
# read-only /dev/shm must not stop the heap (memfd_create instead).
# Needs root (for the mount namespace); exits 77 (CTest: skipped) otherwise.
set -uo pipefail
program=$(readlink -f "$1") mpiexec=$2 runs=${3:-20} np=${4:-4}
heap=${CROWN_HEAP_SIZE:-256M}
if [ "${CROWN_KILL_INSIDE:-}" != 1 ]; then
  if [ "$(id -u)" -ne 0 ] || ! command -v unshare > /dev/null; then
    echo "SKIP: needs root and unshare"; exit 77
  fi
  CROWN_KILL_INSIDE=1 exec unshare --mount --propagation private "$0" "$@"
fi
mount -t tmpfs -o size=4G crown-kill-test /dev/shm || { echo "SKIP: cannot mount a tmpfs"; exit 77; }
export CROWN_HEAP_SIZE=$heap CROWN_LOG=error
seed=${CROWN_KILL_SEED:-$$}
RANDOM=$seed

crown_names() { find /dev/shm -mindepth 1 -maxdepth 1 -iname '*crown*' -printf '%f '; }
shm_used() { df --output=used -B1 /dev/shm | tail -1 | tr -d ' '; }
listed_bytes() { du -sB1 /dev/shm | cut -f1; }
# The children of mpirun ($1) that run the program (mpirun forks helpers too).
ranks_of() {
  local p
  for p in $(pgrep -P "$1"); do
    [ "$(readlink "/proc/$p/exe")" = "$program" ] && echo "$p"
  done
}

# Starts the job in the background; `appeared` is when all NP ranks exist (epoch ms),
# `pids` their processes. A job that outlives 30 s is killed (mpirun itself has been
# seen to hang after a rank died early, ignoring SIGTERM).
launch() {
  timeout -k 5 30 "$mpiexec" -np "$np" --oversubscribe "$program" > "$log" 2>&1 &
  job=$!
  mpirun_pid=
  for _ in $(seq 1 2000); do
    [ -n "$mpirun_pid" ] || mpirun_pid=$(pgrep -P "$job" | head -1)
    [ -n "$mpirun_pid" ] && [ "$(ranks_of "$mpirun_pid" | wc -l)" -ge "$np" ] && break
    kill -0 "$job" 2> /dev/null || break
    sleep 0.005
  done
  appeared=$(date +%s%3N)
  pids=$(ranks_of "$mpirun_pid")
}

# mpirun may return before its ranks have finished exiting (a 1 GiB mapping takes a
# while to release): true once every thread of each is gone or a zombie. (A process
# whose main thread is a zombie may still have threads, and its memory, alive.)
settled() {
  local stat state
  for stat in $(for p in $pids; do echo /proc/"$p"/task/*/stat; done); do
    state=$(awk '{print $3}' "$stat" 2> /dev/null) && [ "$state" != Z ] && return 1
  done
  return 0
}

log=$(mktemp)
trap 'rm -f "$log"' EXIT

# A heap larger than /dev/shm fails early (no SIGBUS later), naming the variable, and
# leaves nothing behind.
CROWN_HEAP_SIZE=2G timeout 60 "$mpiexec" -np "$np" --oversubscribe "$program" > "$log" 2>&1 &&
  { echo "FAIL: $np x 2G heaps in a 4G /dev/shm started"; exit 1; }
# (mpirun ends the job when the first rank exits, so not every rank gets to print.)
grep -m1 "crown::config_error: rank [0-9]*: CROWN_HEAP_SIZE: " "$log" ||
  { echo "FAIL: no rank named CROWN_HEAP_SIZE:"; cat "$log"; exit 1; }
[ -z "$(crown_names)" ] || { echo "FAIL: left $(crown_names)"; exit 1; }

# A /dev/shm that cannot hold the heap file (read-only here) leaves memfd_create: the
# job still starts (Open MPI and UCX complain about their own segments).
mount -o remount,ro /dev/shm
CROWN_HEAP_SIZE=16M timeout -k 5 30 "$mpiexec" -np "$np" --oversubscribe "$program" > "$log" 2>&1 ||
  { echo "FAIL: no heap without a writable /dev/shm:"; cat "$log"; exit 1; }
mount -o remount,rw /dev/shm
echo "with /dev/shm read-only: $(grep -c '^rank [0-9]*: host=' "$log") of $np ranks started"

# The shortest of three undisturbed runs (a busy machine makes some much longer).
span=
for _ in 1 2 3; do
  launch
  wait "$job" || { echo "FAIL: the undisturbed run failed:"; cat "$log"; exit 1; }
  took=$(($(date +%s%3N) - appeared))
  [ -z "$span" ] || [ "$took" -lt "$span" ] && span=$took
done
echo "undisturbed start-up and exit: ${span} ms after the ranks appeared (np $np, heap $heap, seed $seed)"

failures=0 killed=0 hung=0
for run in $(seq 1 "$runs"); do
  delay=$((RANDOM * span / 32768))
  victim=$((RANDOM % np))
  launch
  sleep "$(printf '%d.%03d' $((delay / 1000)) $((delay % 1000)))"
  pid=$(ranks_of "$mpirun_pid" | sed -n "$((victim + 1))p")
  outcome="finished before the kill"
  if [ -n "$pid" ] && kill -9 "$pid" 2> /dev/null; then
    outcome="killed rank process $pid (child $victim)"
    killed=$((killed + 1))
  fi
  wait "$job"
  rc=$?
  # A run the kill missed ended before `delay`: the span for the next runs shrinks to it.
  took=$(($(date +%s%3N) - appeared))
  [ "$outcome" = "finished before the kill" ] && [ "$rc" -eq 0 ] && span=$delay
  # Any other end than a clean exit or the kill (137) is shown with mpirun's words for it.
  [ "$rc" -ne 0 ] && [ "$rc" -ne 137 ] &&
    outcome="$outcome ($(grep -a -m1 -i 'signal\|crown::' "$log" | cut -c1-120))"
  if [ "$took" -ge 29000 ]; then
    outcome="$outcome; the job hung, ended by timeout"
    hung=$((hung + 1))
  fi
  # Every process of the job is gone before /dev/shm is judged.
  for _ in $(seq 1 200); do settled && break; sleep 0.05; done
  if ! settled; then
    outcome="$outcome; ranks still running 10 s after the job ended: ${pids//$'\n'/ } (killed now)"
    # shellcheck disable=SC2086
    kill -9 $pids 2> /dev/null
    failures=$((failures + 1))
  fi
  names=$(crown_names)
  hidden=$(($(shm_used) - $(listed_bytes)))
  left="nothing"
  if [ -n "$names" ] || [ "$hidden" -gt 65536 ]; then
    left="$names(${hidden} bytes not in any listed file; $(shm_used) used)"
    failures=$((failures + 1))
  fi
  printf 'run %2d: kill at %4d ms: %s, exit %d; left in /dev/shm: %s\n' "$run" "$delay" \
    "$outcome" "$rc" "$left"
  # Leftovers (Crown's or Open MPI's) must not pile up from run to run.
  rm -rf /dev/shm/* /dev/shm/.[!.]* 2> /dev/null
done
echo "$killed of $runs runs killed a rank during start-up; $hung jobs hung (ended by timeout);" \
  "$failures left something of Crown's"
[ "$failures" -eq 0 ]
