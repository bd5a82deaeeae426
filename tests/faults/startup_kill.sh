#!/usr/bin/env bash
# startup_kill.sh PROGRAM MPIEXEC [RUNS] [NP]
# Kills one rank (SIGKILL, a random one) at RUNS random moments of start-up of PROGRAM
# (crown-info) under `MPIEXEC -np NP`, and checks after each job that /dev/shm holds
# nothing of Crown's: no name containing "crown", and no bytes in use beyond the files
# still listed (Open MPI's own segments). The jobs run in a private mount namespace with
# a fresh tmpfs on /dev/shm, so other jobs on the machine neither disturb nor are seen.
# The moments are uniform over the span from the ranks' appearance to the end of an
# undisturbed run (measured first); a seed makes them repeatable (CROWN_KILL_SEED).
# First, a heap too large for /dev/shm must fail on every rank with a config_error.
# Needs root (for the mount namespace); exits 77 (CTest: skipped) otherwise.
set -uo pipefail
program=$1 mpiexec=$2 runs=${3:-20} np=${4:-4}
heap=${CROWN_HEAP_SIZE:-256M}
if [ "${CROWN_KILL_INSIDE:-}" != 1 ]; then
  [ "$(id -u)" -eq 0 ] && command -v unshare > /dev/null || {
    echo "SKIP: needs root and unshare"; exit 77; }
  CROWN_KILL_INSIDE=1 exec unshare --mount --propagation private "$0" "$@"
fi
mount -t tmpfs -o size=4G crown-kill-test /dev/shm || { echo "SKIP: cannot mount a tmpfs"; exit 77; }
export CROWN_HEAP_SIZE=$heap CROWN_LOG=error
seed=${CROWN_KILL_SEED:-$$}
RANDOM=$seed

shm_used() { df --output=used -B1 /dev/shm | tail -1 | tr -d ' '; }
listed_bytes() { du -sB1 /dev/shm | cut -f1; }
ranks_of() { pgrep -P "$1" | head -n "$np"; }

# Starts the job in the background; prints when all NP ranks exist (epoch ms).
launch() {
  timeout 60 "$mpiexec" -np "$np" --oversubscribe "$program" > "$log" 2>&1 &
  job=$!
  mpirun_pid=
  for _ in $(seq 1 2000); do
    [ -n "$mpirun_pid" ] || mpirun_pid=$(pgrep -P "$job" | head -1)
    [ -n "$mpirun_pid" ] && [ "$(ranks_of "$mpirun_pid" | wc -l)" -ge "$np" ] && break
    kill -0 "$job" 2> /dev/null || break
    sleep 0.005
  done
  appeared=$(date +%s%3N)
}

log=$(mktemp)
trap 'rm -f "$log"' EXIT

# A heap larger than /dev/shm fails early (no SIGBUS later) on every rank, naming the
# variable, and leaves nothing behind.
CROWN_HEAP_SIZE=2G timeout 60 "$mpiexec" -np "$np" --oversubscribe "$program" > "$log" 2>&1 &&
  { echo "FAIL: $np x 2G heaps in a 4G /dev/shm started"; exit 1; }
for r in $(seq 0 $((np - 1))); do
  grep -q "crown::config_error: rank $r: CROWN_HEAP_SIZE: " "$log" ||
    { echo "FAIL: rank $r did not name CROWN_HEAP_SIZE:"; cat "$log"; exit 1; }
done
grep -m1 "rank 0: CROWN_HEAP_SIZE" "$log"
[ -z "$(ls -A /dev/shm | grep -i crown)" ] || { echo "FAIL: left $(ls -A /dev/shm)"; exit 1; }

launch
wait "$job" || { echo "FAIL: the undisturbed run failed:"; cat "$log"; exit 1; }
span=$(($(date +%s%3N) - appeared))
echo "undisturbed start-up and exit: ${span} ms after the ranks appeared (np $np, heap $heap, seed $seed)"

failures=0 killed=0
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
  # Every process of the job is gone before /dev/shm is judged.
  for _ in $(seq 1 200); do pgrep -f "^$program" > /dev/null || break; sleep 0.05; done
  names=$(ls -A /dev/shm | grep -i crown)
  hidden=$(($(shm_used) - $(listed_bytes)))
  left="nothing"
  if [ -n "$names" ] || [ "$hidden" -gt 65536 ]; then
    left="$(echo "$names" | tr '\n' ' ')(${hidden} bytes not in any listed file; $(shm_used) used)"
    failures=$((failures + 1))
  fi
  printf 'run %2d: kill at %4d ms: %s, exit %d; left in /dev/shm: %s\n' "$run" "$delay" \
    "$outcome" "$rc" "$left"
  # Leftovers (Crown's or Open MPI's) must not pile up from run to run.
  rm -rf /dev/shm/* /dev/shm/.[!.]* 2> /dev/null
done
echo "$killed of $runs runs killed a rank during start-up; $failures left something of Crown's"
[ "$failures" -eq 0 ]
