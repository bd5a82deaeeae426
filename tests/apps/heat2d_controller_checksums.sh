#!/usr/bin/env bash
# tests/apps/heat2d_controller_checksums.sh HEAT2D MPIEXEC
# heat2d driven from the controller (rank 0, with the other ranks as workers) must give
# bitwise the checksum of SPMD heat2d on as many ranks with the same mesh, and of the
# SPMD solver it runs on its own workers in the same job.
set -euo pipefail
heat2d=$1 mpiexec=$2
args=(--n 67 --iterations 40)
run() { # NP [heat2d options...]
  local np=$1
  shift
  "$mpiexec" -np "$np" --oversubscribe "$heat2d" "${args[@]}" "$@"
}
failed=0
for case in "2" "3" "5" "3 --mesh 2x1" "5 --mesh 1x4 --no-overlap"; do
  set -- $case
  np=$1
  shift
  spmd=$(run $((np - 1)) "$@" | sed -n 's/^checksum //p')
  out=$(run "$np" --controller "$@")
  driven=$(sed -n 's/^checksum //p' <<< "$out")
  same_job=$(sed -n 's/^spmd checksum //p' <<< "$out")
  if [ -n "$spmd" ] && [ "$driven" = "$spmd" ] && [ "$same_job" = "$spmd" ]; then
    echo "np=$case: controller $driven = SPMD on $((np - 1)) ranks"
  else
    echo "np=$case: controller '$driven', its SPMD run '$same_job', SPMD on $((np - 1)) ranks '$spmd'"
    failed=1
  fi
done
# Commands and replies through a tree of depth 2.
spmd=$(run 4 | sed -n 's/^checksum //p')
driven=$(CROWN_FANOUT=2 run 5 --controller | sed -n 's/^checksum //p')
[ "$driven" = "$spmd" ] && echo "np=5, fan-out 2: same" || { echo "fan-out 2: '$driven'"; failed=1; }
exit $failed
