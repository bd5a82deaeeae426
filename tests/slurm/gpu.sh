#!/usr/bin/env bash
# tests/slurm/gpu.sh SCRIPT APPS_DIR: jobscripts/heat2d-gpu.sbatch on a one-node Slurm whose
# node has 4 fake gres/gpu (plain files stand in for devices: there is no GPU here).
# Checks that Slurm allocates the job 4 GPUs (--gpus-per-task=1) and starts every task
# (with fake devices Slurm sets no CUDA_VISIBLE_DEVICES, so the per-task binding itself
# is not observable here), then that the job completes with heat2d's checksum (the CPU
# run's, bitwise) where the tasks see a CUDA device; where they see none (fake devices,
# or no CUDA in the build) crown-heat2d --gpu says so on every rank and the test, with
# the allocation checked, exits 77 naming why.
set -euo pipefail
script=$1 apps=$2
export CLUSTER_FAKE_GPUS=4
source "$(dirname "$0")/cluster.sh"
cluster_up
out=$cluster_dir/job.out
job=$(cluster_run "$out" --cpus-per-task=1 --export=ALL,APPS_DIR="$apps" "$script" \
  --n 128 --iterations 80) || true
cat "$out"
scontrol show job -d "$job" | grep -E "TRES|JobState|GRES"
scontrol show job -d "$job" | grep -Eq "gres/gpu=4|GRES=gpu:4|gres:gpu:4" ||
  { echo "FAIL: the job was not given 4 GPUs"; exit 1; }
[ "$(grep -c "^rank [0-3] on .*CUDA_VISIBLE_DEVICES=" "$out")" = 4 ] ||
  { echo "FAIL: not every task started with a GPU binding"; exit 1; }
for why in "no GPU is visible to this rank" "built without CUDA"; do
  if grep -q "$why" "$out"; then
    echo "slurm gpu test: Slurm allocated gres/gpu=4 and started 4 tasks; crown-heat2d --gpu" \
      "could not run: $(grep -m1 "$why" "$out"): skipped"
    exit 77
  fi
done
[ "$(cluster_state "$job")" = COMPLETED ] && grep -q "^checksum 750.96103842088439$" "$out" ||
  { echo "FAIL: the GPU job did not end with heat2d's checksum"; exit 1; }
echo "slurm gpu test: passed"
