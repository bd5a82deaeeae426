#!/usr/bin/env bash
# crown-train end to end, under mpirun:
#   train_runs.sh parity CROWN_TRAIN MPIEXEC  float64 loss of each of 20 steps under dp = 2, 3, 4
#       (SPMD), dp = 2 with 2 micro-batches (no_sync), dp = 3 with 4 KiB buckets (many, reduced
#       while backward runs), dp = 2 in controller mode at np 3; FSDP's FULL_SHARD,
#       SHARD_GRAD_OP and HYBRID_SHARD (two pretend hosts) at dp = 2 and 4, FULL_SHARD at dp = 3
#       with 2 micro-batches and in controller mode; tp = 2, pp = 2 (1F1B) with 1, 2 and 4
#       micro-batches, dp x tp, pp x dp, pp x tp, dp x tp x pp (np 8), FSDP inside dp x tp and
#       pp x dp, and dp x tp in controller mode at np 5; against the single-rank run of the same global batch: within 1e-9 relative.
#   train_runs.sh errors CROWN_TRAIN MPIEXEC  bad plans, batches and corpora: every rank names
#       the numbers and the rule, and the job fails before any step.
#   train_runs.sh resume CROWN_TRAIN MPIEXEC CROWN_RUN  checkpoints every 5 steps: a rank killed
#       at step 13 and rerun by crown-run with --resume ends with the uninterrupted float64
#       loss curve, bitwise; a checkpoint of dp=4 (SPMD) resumed under dp=2 in controller mode,
#       FULL_SHARD's under DDP, DDP's under SHARD_GRAD_OP, pp=2,tp=2's under DDP and
#       FULL_SHARD's under dp x tp with SHARD_GRAD_OP continue it within 1e-9.
set -euo pipefail
mode=$1 train=$2 mpiexec=$3 crown_run=${4:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
model=(--steps 20 --context 16 --channels 32 --heads 4 --blocks 2 --dtype double --sample 0
       --quiet --seed 7)
run() { # np, csv, args...
  local np=$1 csv=$2
  shift 2
  "$mpiexec" -np "$np" --oversubscribe "$train" "${model[@]}" --csv "$work/$csv" "$@"
}
compare() { # reference.csv other.csv what
  awk -F, -v what="$3" 'NR == FNR { ref[$1] = $2; next }
    FNR > 1 { d = $2 - ref[$1]; if (d < 0) d = -d; r = d / ref[$1]; if (r > worst) worst = r; n++ }
    END { printf "%s: %d steps, worst relative difference %.3g\n", what, n, worst
          if (n != 20 || worst > 1e-9) exit 1 }' "$work/$1" "$work/$2"
}
case $mode in
resume)
  ck=(--checkpoint-every 5)
  run 2 whole.csv --plan dp=2 --batch 6 "${ck[@]}" --checkpoint-dir "$work/a"
  "$crown_run" --retries 2 -- "$mpiexec" -np 2 --oversubscribe \
    -x CROWN_FAULT=kill:rank=1:at=step:count=13 "$train" "${model[@]}" --csv "$work/killed.csv" \
    --plan dp=2 --batch 6 "${ck[@]}" --checkpoint-dir "$work/b" > "$work/run.log" 2>&1 || {
    cat "$work/run.log"; exit 1; }
  grep -q "resumed after step 10" "$work/run.log" || { cat "$work/run.log"; exit 1; }
  echo "killed at step 13, resumed after step 10: steps 11-12 redone (the interval is 5)"
  if ! cmp <(cut -d, -f1,2 "$work/whole.csv") <(cut -d, -f1,2 "$work/killed.csv"); then
    echo "the resumed loss curve differs:"; paste -d' ' "$work/whole.csv" "$work/killed.csv"
    exit 1
  fi
  echo "kill + crown-run --resume: all 20 losses bitwise those of the uninterrupted run"
  run 4 reshard.csv --plan dp=4 --batch 3 --steps 10 "${ck[@]}" --checkpoint-dir "$work/c"
  run 3 reshard.csv --plan dp=2 --batch 6 --controller "${ck[@]}" --checkpoint-dir "$work/c" \
    --resume
  compare whole.csv reshard.csv "dp=4 (SPMD) resumed under dp=2 (controller)" || exit 1
  # Checkpoints hold every unit once, whatever the strategy: FULL_SHARD's resumed under
  # DDP, and DDP's under SHARD_GRAD_OP at another rank count, continue the same curve.
  run 3 fsdp_ddp.csv --plan dp=3,fsdp=full --batch 4 --steps 10 "${ck[@]}" --checkpoint-dir "$work/d"
  run 2 fsdp_ddp.csv --plan dp=2 --batch 6 "${ck[@]}" --checkpoint-dir "$work/d" --resume
  compare whole.csv fsdp_ddp.csv "dp=3 FULL_SHARD resumed under dp=2 DDP" || exit 1
  run 2 ddp_fsdp.csv --plan dp=2 --batch 6 --steps 10 "${ck[@]}" --checkpoint-dir "$work/e"
  run 4 ddp_fsdp.csv --plan dp=4,fsdp=grad_op --batch 3 "${ck[@]}" --checkpoint-dir "$work/e" \
    --resume
  compare whole.csv ddp_fsdp.csv "dp=2 DDP resumed under dp=4 SHARD_GRAD_OP" || exit 1
  # Tensor- and pipeline-parallel checkpoints hold the whole model's tensors too.
  run 4 split_ddp.csv --plan pp=2,tp=2,micro=2 --batch 12 --steps 10 "${ck[@]}" \
    --checkpoint-dir "$work/f"
  run 2 split_ddp.csv --plan dp=2 --batch 6 "${ck[@]}" --checkpoint-dir "$work/f" --resume
  compare whole.csv split_ddp.csv "pp=2,tp=2 resumed under dp=2" || exit 1
  run 2 fsdp_split.csv --plan dp=2,fsdp=full --batch 6 --steps 10 "${ck[@]}" \
    --checkpoint-dir "$work/g"
  run 4 fsdp_split.csv --plan dp=2,tp=2,fsdp=grad_op --batch 6 "${ck[@]}" \
    --checkpoint-dir "$work/g" --resume
  compare whole.csv fsdp_split.csv "dp=2 FULL_SHARD resumed under dp=2,tp=2 SHARD_GRAD_OP"
  exit $?
  ;;
parity)
  "$train" "${model[@]}" --csv "$work/ref.csv" --batch 12
  run 2 dp2.csv --plan dp=2 --batch 6
  run 3 dp3.csv --plan dp=3 --batch 4
  run 4 dp4.csv --plan dp=4 --batch 3
  run 2 micro.csv --plan dp=2,micro=2 --batch 6
  run 3 controller.csv --plan dp=2 --batch 6 --controller
  run 3 buckets.csv --plan dp=3 --batch 4 --bucket-bytes 4096 # 11 buckets, reduced in backward
  # FSDP: every strategy at dp = 2 and 4 (HYBRID_SHARD over two pretend hosts), FULL_SHARD at
  # dp = 3 (units padded) with 2 micro-batches, and in controller mode.
  fsdp=()
  for dp in 2 4; do
    for s in full grad_op; do
      run $dp "$s$dp.csv" --plan dp=$dp,fsdp=$s --batch $((12 / dp))
      fsdp+=("$s$dp")
    done
    CROWN_FAKE_HOSTS=2 run $dp "hybrid$dp.csv" --plan dp=$dp,fsdp=hybrid --batch $((12 / dp))
    fsdp+=("hybrid$dp")
  done
  run 3 full3micro.csv --plan dp=3,fsdp=full,micro=2 --batch 4
  run 3 full2controller.csv --plan dp=2,fsdp=full --batch 6 --controller
  # Tensor and pipeline parallelism (1F1B) and their combinations, FSDP inside dp, and a
  # mixed plan in controller mode at np 5.
  run 2 tp2.csv --plan tp=2 --batch 12
  split=(tp2)
  for m in 1 2 4; do
    run 2 "pp2m$m.csv" --plan pp=2,micro=$m --batch 12
    split+=("pp2m$m")
  done
  run 4 dp2tp2.csv --plan dp=2,tp=2 --batch 6
  run 4 pp2dp2.csv --plan pp=2,dp=2,micro=2 --batch 6
  run 4 pp2tp2.csv --plan pp=2,tp=2,micro=3 --batch 12
  run 8 dp2tp2pp2.csv --plan dp=2,tp=2,pp=2,micro=2 --batch 6
  run 4 dp2tp2full.csv --plan dp=2,tp=2,fsdp=full --batch 6
  run 4 pp2dp2grad_op.csv --plan pp=2,dp=2,fsdp=grad_op,micro=2 --batch 6
  run 5 dp2tp2controller.csv --plan dp=2,tp=2 --batch 6 --controller
  split+=(dp2tp2 pp2dp2 pp2tp2 dp2tp2pp2 dp2tp2full pp2dp2grad_op dp2tp2controller)
  status=0
  for c in dp2 dp3 dp4 micro controller buckets "${fsdp[@]}" full3micro full2controller \
    "${split[@]}"; do
    compare ref.csv "$c.csv" "$c" || status=1
  done
  # Sampling gathers the vocabulary over tp and runs the stages in turn: the same bytes.
  text() { sed -n '/sampled text/,$p'; }
  "$train" "${model[@]}" --steps 5 --sample 60 --batch 12 | text > "$work/text1"
  "$mpiexec" -np 4 --oversubscribe "$train" "${model[@]}" --steps 5 --sample 60 --batch 12 \
    --plan pp=2,tp=2,micro=2 | text > "$work/text4"
  if [ -s "$work/text1" ] && cmp -s "$work/text1" "$work/text4"; then
    echo "sampling: pp=2,tp=2 gives the single rank's 60 bytes"
  else
    echo "sampling under pp=2,tp=2 differs:"; cat "$work/text1" "$work/text4"; status=1
  fi
  exit $status
  ;;
errors)
  : > "$work/empty.txt"
  status=0
  expect() { # what, message, args...
    local what=$1 message=$2
    shift 2
    if "$mpiexec" -np 2 --oversubscribe "$train" "${model[@]}" --progress lines "$@" \
      > "$work/out" 2>&1; then
      echo "$what: the job succeeded"; status=1; return
    fi
    local n
    n=$(grep -cF -- "$message" "$work/out" || true)
    if [ "$n" -ne 2 ] || grep -q "^step " "$work/out"; then
      echo "$what: expected '$message' from both ranks and no step; got:"; cat "$work/out"; status=1
    else
      echo "$what: both ranks: $(grep -m1 -F -- "$message" "$work/out")"
    fi
  }
  expect "plan size" "dp x tp x pp = 3 x 1 x 1 = 3 workers, but the job has 2" --plan dp=3
  expect "tp and heads" "tp=2 does not divide the 3 heads" --plan tp=2 --heads 3 --channels 30
  expect "pp and blocks" "pp=2 is more stages than the 1 blocks" --plan pp=2 --blocks 1
  expect "stage boundaries" "within (0, 2) blocks; 5 does not" --plan pp=2,stages=5
  expect "strategy" "fsdp must be one of no, full, grad_op, hybrid" --plan dp=2,fsdp=zero3
  expect "hybrid on one host" "all 2 data-parallel ranks run on one host" --plan dp=2,fsdp=hybrid
  expect "micro-batches" "3 micro-batches do not divide the batch of 4 samples" \
    --plan dp=2,micro=3 --batch 4
  expect "missing corpus" "corpus $work/none: no such file or directory" --plan dp=2 \
    --data "$work/none"
  expect "empty corpus" "corpus $work/empty.txt: 0 bytes in 1 files" --plan dp=2 \
    --data "$work/empty.txt"
  expect "controller plan" "= 2 workers, but the job has 1" --plan dp=2 --controller
  expect "model" "4 heads do not divide 30 channels" --plan dp=2 --channels 30 --heads 4
  exit $status
  ;;
esac
echo "unknown mode $mode" >&2
exit 2
