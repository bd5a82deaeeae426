#!/usr/bin/env bash
# tests/slurm/requeue.sh APP HOW SCRIPT APPS_DIR
#   APP heat2d|heat2d_fortran|train, HOW fault|signal|usr1 (heat2d_fortran: signal)
# Runs SCRIPT (jobscripts/heat2d.sbatch, heat2d-fortran.sbatch or train.sbatch) on a
# one-node Slurm (cluster.sh) uninterrupted, then interrupted, and checks that the
# interrupted job ends COMPLETED with the uninterrupted result bitwise (heat2d and
# heat2d_fortran: the checksum; train: the float64 loss curve):
#   fault:  CROWN_FAULT=kill:rank=2:at=step:count=50 kills rank 2 in the first start; the
#           script requeues itself (comment crown-failures=1) and resumes from the last
#           checkpoint; the second start does not reach arrival 50 again.
#   signal: `scontrol requeue` once the first checkpoint exists: every task gets SIGTERM
#           (and the batch shell's trap sends USR1 through srun: either may come first),
#           the ranks checkpoint and exit 75, Slurm requeues, the next start resumes there.
#   usr1:   USR1 to the batch shell only (`scancel --signal=USR1 --batch`, what
#           --signal=B:USR1@120 sends before the time limit): the script's trap passes it
#           through srun to the ranks, they checkpoint and exit 75, the script requeues.
# Prints the requeue delay (the failed start's end to the next start), the work lost
# (iterations or steps computed twice) and the time to resume (the next start to its
# first step after the checkpoint was read).
set -euo pipefail
app=$1 how=$2 script=$3 apps=$4
source "$(dirname "$0")/cluster.sh"
cluster_up
d=$cluster_dir
cd "$d"
case $app/$how in
  heat2d/fault) every=20 args=(--n 128 --iterations 80) ;;
  # Long enough that the signal, sent 0.2-0.3 s after the first checkpoint, finds the
  # ranks computing on a fast machine too (2026-12-06: 60000 Fortran iterations took
  # 0.64 s, and the requeue came after the run had ended): about 3 s here today.
  heat2d/signal | heat2d/usr1) every=1000 args=(--n 256 --iterations 60000) ;;
  heat2d_fortran/signal) every=2000 args=(--n 128 --iterations 200000) ;;
  train/fault) every=10 args=(--steps 60) ;;
  train/signal) every=20 args=(--steps 300) ;;
esac
# A small model in float64, so that the loss curve can be compared bitwise.
[ "$app" = train ] && args+=(--context 16 --channels 32 --heads 4 --blocks 2 --dtype double
  --sample 0 --batch 4 --progress none)
result() { # the bitwise result of job NAME
  if [ "$app" = train ]; then cut -d, -f1,2 "$d/$1.csv"; else sed -n 's/^checksum //p' "$d/$1.out"; fi
}
submit() { # submit NAME [EXPORTS]: prints the job id
  local extra=()
  [ "$app" = train ] && extra=(--csv "$d/$1.csv")
  sbatch --parsable --output="$d/$1.out" --chdir="$d" --cpus-per-task=1 \
    --export="ALL,APPS_DIR=$apps,OMPI_MCA_mpi_yield_when_idle=1,CHECKPOINT_EVERY=$every,CHECKPOINT_DIR=$d/$1.ck${2:+,$2}" \
    "$script" "${args[@]}" "${extra[@]}"
}
finish() { # finish JOB NAME: waits, prints the output, checks COMPLETED
  local state
  state=$(cluster_wait "$1" 240)
  echo "--- $2 (job $1): $state"
  cat "$d/$2.out"
  [ "$state" = COMPLETED ] || { echo "FAIL: job $2 ended $state"; exit 1; }
}
stamp() { sed -n "s/.*$1.* at \([0-9.]*\)$/\1/p" "$d/$2.out" | sed -n "${3:-1}p"; }

whole=$(submit whole)
finish "$whole" whole
if [ "$how" = fault ]; then
  job=$(submit cut "CROWN_FAULT=kill:rank=2:at=step:count=50")
else
  job=$(submit cut)
  for _ in $(seq 1600); do # the first checkpoint, then requeue while it runs on
    ls "$d/cut.ck" 2> /dev/null | grep -q . && break
    sleep 0.05
  done
  sleep 0.2
  if [ "$how" = usr1 ]; then
    echo "USR1 to the batch shell of job $job at $(date +%s.%N)"
    scancel --signal=USR1 --batch "$job"
  else
    echo "scontrol requeue $job at $(date +%s.%N)"
    scontrol requeue "$job"
  fi
fi
finish "$job" cut
restarts=$(scontrol show job "$job" | sed -n 's/.*Restarts=\([0-9]*\).*/\1/p')
[ "$restarts" = 1 ] || { echo "FAIL: $restarts restarts, not 1"; exit 1; }
if [ "$how" = fault ]; then
  grep -q "requeue 1 of" "$d/cut.out" || { echo "FAIL: the script did not requeue itself"; exit 1; }
  scontrol show job "$job" | grep -q "Comment=crown-failures=1" || { echo "FAIL: no failure count in the comment"; exit 1; }
elif [ "$how" = usr1 ]; then
  grep -q "SIGUSR1: checkpointed after" "$d/cut.out" || { echo "FAIL: no checkpoint on SIGUSR1"; exit 1; }
  grep -q "time limit near; requeued" "$d/cut.out" || { echo "FAIL: the script did not requeue"; exit 1; }
else
  # `scontrol requeue` sends SIGTERM to the tasks and to the batch shell, whose trap passes
  # USR1 through srun: whichever reaches a rank first is the one it names (both stop it).
  grep -Eq "SIG(TERM|USR1): checkpointed after" "$d/cut.out" ||
    { echo "FAIL: no checkpoint on SIGTERM"; exit 1; }
fi
[ -n "$(result whole)" ] && [ "$(result whole)" = "$(result cut)" ] || {
  echo "FAIL: the requeued job's result differs from the uninterrupted one's:"
  diff <(result whole) <(result cut) | head
  exit 1
}
# Figures: starts and srun's ends are stamped by the script (seconds since the epoch).
first_end=$(stamp "srun exit" cut 1)
second=$(stamp "start 2 on" cut)
second_end=$(stamp "srun exit" cut 2)
if [ "$app" != train ]; then
  made=$(sed -n 's/.*checkpointed after iteration \([0-9]*\).*/\1/p' "$d/cut.out")
  from=$(sed -n 's/^resumed from .* at iteration \([0-9]*\).*/\1/p' "$d/cut.out")
  loop=$(sed -n 's/^time \([0-9.]*\) s.*/\1/p' "$d/cut.out" | tail -1)
  unit=iterations
else
  made=$(sed -n 's/.*checkpointed after step \([0-9]*\).*/\1/p' "$d/cut.out")
  from=$(sed -n 's/^resumed after step \([0-9]*\).*/\1/p' "$d/cut.out")
  loop=$(tail -1 "$d/cut.csv" | cut -d, -f4)
  unit=steps
fi
[ "$how" = fault ] && made=49 # killed on arrival 50, in step 50: 49 made
awk -v a="$first_end" -v b="$second" -v c="$second_end" -v l="$loop" -v m="$made" -v f="$from" \
  -v u="$unit" 'BEGIN { printf "requeue delay %.1f s; work lost %d %s (%d made, resumed from %d); time to resume %.1f s (start to first step: srun, MPI, reading the checkpoint)\n", b - a, m - f, u, m, f, c - b - l }'
echo "slurm requeue test ($app, $how): passed, bitwise equal to the uninterrupted run"
