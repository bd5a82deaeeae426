#!/usr/bin/env bash
# crown-train with the planner, under mpirun (tests/parallel/CMakeLists.txt):
#   plan_runs.sh CROWN_TRAIN MPIEXEC
# - --calibrate on 2 ranks writes a cluster file (1 host x 2 devices, fp64) and a model file
#   (one layer per block, each with measured forward, backward and optimizer seconds);
# - --plan auto on those files runs the plan it prints first: its float64 loss curve equals,
#   bitwise, that of the same plan given by hand; the CSV names the plan and the predictions;
#   a plan given with --cluster gets a predicted step in its CSV too;
# - the planner's memory per rank is within 10% of the accounting allocator's peak (the
#   largest rank) under dp=2, tp=2, pp=2 with 2 micro-batches and FULL_SHARD;
# - bad input, each a clear error and no step run: a cluster file of 2 devices on 1 rank, one
#   measured in fp64 for a float run, a model file of another model or optimizer, a plan over
#   --memory-budget, --plan auto with nothing that fits, --plan auto in controller mode; a
#   rank killed during calibration (the job fails naming it, no file is left), and a plan
#   --plan auto chose that fails while training (named, with its prediction).
set -euo pipefail
train=$1 mpiexec=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export OPENBLAS_NUM_THREADS=1
model=(--context 16 --channels 32 --heads 4 --blocks 4 --sample 0 --quiet --seed 7)
run() { # np, args...
  local np=$1
  shift
  "$mpiexec" -np "$np" --oversubscribe -x OPENBLAS_NUM_THREADS "$train" "${model[@]}" "$@"
}
fail() {
  echo "FAIL: $*"
  exit 1
}
expect_error() { # what, needle, args... : exit 2, the needle on stderr, no step taken
  local what=$1 needle=$2
  shift 2
  local status=0
  run "$@" > out.txt 2> err.txt || status=$?
  [ "$status" -ne 0 ] || fail "$what: exit status 0"
  grep -qF -- "$needle" err.txt || { cat err.txt; fail "$what: '$needle' missing"; }
  if grep -q '^crown-train: .* on [0-9]* ranks' out.txt; then fail "$what: training started"; fi
  echo "ok: $what: $(grep -F -- "$needle" err.txt | head -n 1)"
}

# Calibration.
run 2 --dtype double --global-batch 8 --calibrate --cluster c2.json --model-file m2.json > cal.txt
grep -q '"hosts":1,"devices_per_host":2' c2.json || fail "cluster file: $(cat c2.json)"
grep -q '"precision":"fp64"' c2.json || fail "cluster precision: $(cat c2.json)"
[ "$(grep -o '"forward_seconds":[0-9.e-]*' m2.json | wc -l)" -eq 4 ] || fail "layer times: $(cat m2.json)"
[ "$(grep -o '"optimizer_seconds":[0-9.e-]*' m2.json | wc -l)" -eq 4 ] || fail "optimizer times"
echo "ok: calibrated: $(grep -c '^layer' cal.txt) layer kinds measured"

# --plan auto runs the plan it chose.
run 2 --dtype double --steps 4 --global-batch 8 --plan auto --cluster c2.json \
  --model-file m2.json --csv auto.csv > auto.txt
grep -q "the planner's best" auto.txt || fail "no ranking: $(cat auto.txt)"
chosen=$(sed -n 's/^crown-train: planned \([^:]*\): predicted .*/\1/p' auto.txt)
[ -n "$chosen" ] || fail "no plan chosen: $(cat auto.txt)"
first=$(awk '$1 == "1" { print $2 }' auto.txt)
[ "$first" = "$chosen" ] || fail "ran $chosen, ranked first $first"
grep -q ",\"$chosen\",[0-9.e-]*,[0-9]*$" auto.csv || fail "CSV: $(tail -n 1 auto.csv)"
run 2 --dtype double --steps 4 --global-batch 8 --plan "$chosen" --csv hand.csv > /dev/null
cmp <(cut -d, -f1,2 auto.csv) <(cut -d, -f1,2 hand.csv) || fail "auto's losses differ from $chosen's"
run 2 --dtype double --steps 2 --global-batch 8 --plan tp=2 --cluster c2.json --model-file m2.json \
  --csv tp.csv > /dev/null
grep -q ',"dp=1,tp=2",[0-9.e-]*[1-9][0-9.e-]*,[0-9]*$' tp.csv || fail "tp=2 CSV: $(tail -n 1 tp.csv)"
echo "ok: --plan auto ran $chosen (its losses equal the hand-given plan's, bitwise)"

# Memory: the planner's model against the accounting allocator.
for p in dp=2 tp=2 pp=2,micro=2 dp=2,fsdp=full; do
  run 2 --steps 2 --global-batch 8 --plan "$p" --memory-budget 1G --memory-report --csv m.csv > m.txt
  predicted=$(tail -n 1 m.csv | sed 's/"[^"]*"/plan/' | cut -d, -f10)
  measured=$(sed -n 's/.*all together \([0-9]*\)$/\1/p' m.txt | sort -g | tail -n 1)
  awk -v p="$p" -v a="$predicted" -v b="$measured" 'BEGIN {
    e = (a - b) / b; printf "ok? memory %s: predicted %d, measured %d bytes (%+.2f%%)\n", p, a, b, 100 * e
    if (!(b > 0) || e > 0.1 || e < -0.1) exit 1 }' || fail "memory of $p beyond 10%"
done

# Bad input.
expect_error "cluster of another job" "describes 1 host(s) x 2 device(s) = 2 devices, this job trains on 1 x 1 = 1 ranks" \
  1 --dtype double --plan auto --cluster c2.json --model-file m2.json
expect_error "cluster of another precision" "was measured in fp64, this run trains in fp32" \
  2 --plan dp=2 --cluster c2.json --model-file m2.json
expect_error "model file of another model" "has 4 layers, this model 3 blocks" \
  2 --dtype double --blocks 3 --plan dp=2 --cluster c2.json --model-file m2.json
expect_error "model file of another optimizer" "timed the adam optimizer's step, this run uses sgd" \
  2 --dtype double --optimizer sgd --plan dp=2 --cluster c2.json --model-file m2.json
expect_error "over the memory budget" "over the budget of" 2 --plan dp=2 --memory-budget 64K
expect_error "nothing fits" "no plan of 2 ranks runs this model within" \
  2 --dtype double --plan auto --cluster c2.json --model-file m2.json --memory-budget 64K
expect_error "auto in controller mode" "controller mode takes an explicit --plan" \
  3 --plan auto --controller
status=0
"$mpiexec" -np 2 --oversubscribe -x OPENBLAS_NUM_THREADS -x CROWN_FAULT=kill:rank=1:at=co_sum:count=6 \
  "$train" "${model[@]}" --calibrate --cluster k.json --model-file k2.json > out.txt 2> err.txt ||
  status=$?
[ "$status" -ne 0 ] || fail "a calibration with a dead rank exited 0"
grep -q "rank 1 .*(Killed)" err.txt || { cat err.txt; fail "the dead rank is not named"; }
[ ! -e k.json ] && [ ! -e k2.json ] || fail "an interrupted calibration left a file"
echo "ok: a rank killed while calibrating: $(grep 'rank 1 .*(Killed)' err.txt)"
status=0
"$mpiexec" -np 2 --oversubscribe -x OPENBLAS_NUM_THREADS -x CROWN_FAULT=throw:rank=1:at=step:count=2 \
  "$train" "${model[@]}" --dtype double --steps 4 --plan auto --cluster c2.json --model-file m2.json \
  > out.txt 2> err.txt || status=$?
[ "$status" -ne 0 ] || fail "a failing auto plan exited 0"
grep -q "rank 1: the plan --plan auto chose (.*, predicted .* s per step) failed: .*injected exception at step on rank 1" err.txt ||
  { cat err.txt; fail "the failing auto plan is not named"; }
echo "ok: a failing auto plan: $(grep -o 'the plan --plan auto chose.*' err.txt | head -n 1)"
