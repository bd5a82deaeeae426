#!/usr/bin/env bash
# fault_job.sh PROGRAM MPIEXEC NP MODE FAULT BOUND REGEX...
# Runs `MPIEXEC -np NP PROGRAM MODE` with CROWN_FAULT=FAULT (see fault_main.cpp) in a
# private mount namespace with a fresh tmpfs on /dev/shm, and checks that the job ends
# non-zero within BOUND seconds, that its output matches every REGEX (extended grep;
# they name the rank and what it was doing), and that /dev/shm holds nothing of Crown's
# once every process of the job is gone: no name containing "crown", and no bytes in
# use beyond the files still listed (an unnamed heap still mapped somewhere).
# Prints one line for the README's fault table. Needs root; exits 77 (skipped) otherwise.
set -uo pipefail
program=$(readlink -f "$1") mpiexec=$2 np=$3 mode=$4 fault=$5 bound=$6
shift 6
if [ "${FAULT_JOB_INSIDE:-}" != 1 ]; then
  if [ "$(id -u)" -ne 0 ] || ! command -v unshare > /dev/null; then
    echo "SKIP: needs root and unshare"; exit 77
  fi
  FAULT_JOB_INSIDE=1 exec unshare --mount --propagation private "$0" "$program" "$mpiexec" \
    "$np" "$mode" "$fault" "$bound" "$@"
fi
mount -t tmpfs -o size=2G crown-fault-test /dev/shm || { echo "SKIP: cannot mount a tmpfs"; exit 77; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
tag="fault-job-$$" # names this job's processes (other jobs of the suite may run beside it)

start=$(date +%s%3N)
CROWN_FAULT=$fault timeout -k 5 $((bound + 30)) "$mpiexec" -np "$np" --oversubscribe \
  "$program" "$mode" "$tag" > "$log" 2>&1
rc=$?
took=$(($(date +%s%3N) - start))
for _ in $(seq 1 200); do # every process of the job gone (a stopped one is killed by mpirun)
  pgrep -f -- "$tag" > /dev/null || break
  sleep 0.05
done
lingering=$(pgrep -f -- "$tag" | tr '\n' ' ')
[ -z "$lingering" ] || kill -9 $lingering 2> /dev/null

# A process whose main thread has exited (no longer matched above) may still hold its
# mappings for a moment: memory that is only slow to go is given 10 s; a leak stays.
unlisted() {
  echo $(($(df --output=used -B1 /dev/shm | tail -1 | tr -d ' ') - $(du -sB1 /dev/shm | cut -f1)))
}
for _ in $(seq 1 200); do
  [ "$(unlisted)" -le 65536 ] && break
  sleep 0.05
done
names=$(find /dev/shm -mindepth 1 -maxdepth 1 -iname '*crown*' -printf '%f ')
used=$(df --output=used -B1 /dev/shm | tail -1 | tr -d ' ')
listed=$(du -sB1 /dev/shm | cut -f1)
left="nothing"
[ -n "$names" ] || [ $((used - listed)) -gt 65536 ] && left="${names}($((used - listed)) bytes unlisted)"

failures=()
[ "$rc" -ne 0 ] || failures+=("the job exited 0")
[ "$took" -le $((bound * 1000)) ] || failures+=("it took ${took} ms, more than ${bound} s")
[ -z "$lingering" ] || failures+=("processes outlived mpirun: $lingering")
[ "$left" = nothing ] || failures+=("left in /dev/shm: $left")
for pattern in "$@"; do
  grep -Eq -- "$pattern" "$log" || failures+=("no line matches /$pattern/")
done
printf '| `%s` | %s | %d ms | exit %d | %s |\n' "$fault" "$mode" "$took" "$rc" "$left"
if [ ${#failures[@]} -gt 0 ]; then
  printf 'FAIL: %s\n' "${failures[@]}"
  echo "--- output:"
  cat "$log"
  exit 1
fi
grep -E -m3 -- "${1:-crown}" "$log" | cut -c1-200
