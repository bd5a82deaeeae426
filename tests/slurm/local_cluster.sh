#!/usr/bin/env bash
# tests/slurm/local_cluster.sh SCRIPT.sbatch EXPECT_REGEX [sbatch options...] [-- ARGS...]
# Starts a one-node Slurm cluster on this machine (cluster.sh: munged, slurmctld, slurmd,
# all in a temporary directory, the node claiming 8 CPUs), submits SCRIPT and waits for it
# (cluster_run; ARGS go to the script), prints the job's output, checks that the job
# COMPLETED and its output matches EXPECT_REGEX, then stops every daemon it started.
# Exit 77 (CTest: skipped) when Slurm or munge is not installed or not root.
set -euo pipefail
script=$1 expect=$2
shift 2
options=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do options+=("$1"); shift; done
[ $# -gt 0 ] && shift
source "$(dirname "$0")/cluster.sh"
cluster_up
out=$cluster_dir/job.out
job=$(cluster_run "$out" "${options[@]}" "$script" "$@") || { echo "slurm test: sbatch refused the job"; exit 1; }
cat "$out"
state=$(cluster_state "$job")
echo "slurm test: job $job ended $state"
[ "$state" = COMPLETED ] || { echo "slurm test: the job failed"; exit 1; }
grep -Eq "$expect" "$out" || { echo "slurm test: no line matches /$expect/"; exit 1; }
echo "slurm test: passed"
