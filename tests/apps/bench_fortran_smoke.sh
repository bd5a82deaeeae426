#!/usr/bin/env bash
# tests/apps/bench_fortran_smoke.sh BUILD_DIR
# scripts/bench-fortran --smoke: every figure of `crown-bench fortran` is printed beside
# OpenCoarrays' in the documented CSV shape (no timing is asserted).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
csv=$("$root/scripts/bench-fortran" --smoke "$1")
echo "$csv"
number='[0-9.e+-]+'
failed=0
for figure in "put_bw,4096,GB/s" "get_bw,4096,GB/s" "put_bw,1048576,GB/s" "get_bw,1048576,GB/s" \
  "put_latency,8,us" "get_latency,8,us" "sync_all,0,us" "strided_put_bw,[0-9]+,GB/s" \
  "strided_get_bw,[0-9]+,GB/s" "co_sum,8,us" "co_sum,8388608,us" "transpose,256,MB/s" \
  "heat2d,256,MLUP/s"; do
  grep -Eq "^fortran,$figure,$number,opencoarrays,$number,[0-9.]+(e[+-][0-9]+)?$" <<< "$csv" ||
    { echo "no line for $figure"; failed=1; }
done
head -n 1 <<< "$csv" | grep -qx "group,op,bytes,unit,crown,baseline,baseline_value,ratio" ||
  { echo "no CSV header"; failed=1; }
exit $failed
