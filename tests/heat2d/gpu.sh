#!/usr/bin/env bash
# tests/heat2d/gpu.sh CROWN_HEAT2D MPIEXEC WORKDIR
# crown-heat2d --gpu (device coarrays, a CUDA stencil) against the CPU run:
#  1. the checksum bitwise equal to the CPU run's on meshes 1x1, 1x2, 2x1, 3x1, 2x2, 1x4
#     and 4x1, on a grid that splits unevenly (the same arithmetic in the same order:
#     stencil.hpp), and at 1x2 and 2x1 across two pretend hosts (CROWN_FAKE_HOSTS=2: the
#     halo puts staged through host memory);
#  2. where checkpoints exist (parallel HDF5): a --gpu run's checkpoints resumed by --gpu
#     at another rank count and by the CPU run, both bitwise the uninterrupted checksum;
#  3. stop signals: SIGUSR1 (mpirun passes it to every rank) during a --gpu run with
#     checkpoints -> exit 75, checkpointed; --gpu --resume ends bitwise equal.
# Exit 77 (skipped), naming why, where crown-heat2d was built without CUDA or no CUDA
# device is visible (cudaGetDeviceCount fails or finds none): nothing is faked.
# HEAT2D_DEVICE_FLAG (default --gpu) may be set empty to check this script on the CPU.
set -u
heat=$1 mpiexec=$2 work=$3
flag=${HEAT2D_DEVICE_FLAG---gpu}
export CROWN_GPU_HEAP_SIZE=${CROWN_GPU_HEAP_SIZE:-64M} # up to 4 ranks share one GPU here
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
fail() { echo "FAIL: $*" >&2; exit 1; }
run() { # NP [options...]
  local np=$1
  shift
  "$mpiexec" -np "$np" --oversubscribe "$heat" "$@"
}
checksum_of() { sed -n 's/^checksum //p' "$1"; }

if ! run 1 $flag --n 16 --iterations 1 > probe.out 2>&1; then
  for why in "built without CUDA" "no GPU is visible to this rank"; do
    if grep -q "$why" probe.out; then
      echo "skipped: $(grep -m1 "$why" probe.out)"
      exit 77
    fi
  done
  cat probe.out
  fail "crown-heat2d $flag failed"
fi
grep -q "of GPUs (device coarrays)" probe.out || [ -z "$flag" ] || { cat probe.out; fail "$flag did not run on GPUs"; }

# 1. Bitwise the CPU checksum, uneven blocks (67 = 34 + 33 = 23 + 23 + 21).
args=(--n 67 --iterations 40)
run 1 "${args[@]}" > cpu.out 2>&1 || { cat cpu.out; fail "the CPU run"; }
ref=$(checksum_of cpu.out)
[ -n "$ref" ] || fail "no checksum from the CPU run"
echo "CPU, 1 rank: checksum $ref"
for r in "1 1" "1 2 --mesh 1x2" "1 2 --mesh 2x1" "1 3 --mesh 3x1" "1 4 --mesh 2x2" \
  "1 4 --mesh 1x4" "1 4 --mesh 4x1" "2 2 --mesh 1x2" "2 2 --mesh 2x1"; do # HOSTS NP [MESH]
  set -- $r
  hosts=$1
  shift
  CROWN_FAKE_HOSTS=$hosts run "$@" $flag "${args[@]}" > gpu.out 2>&1 ||
    { cat gpu.out; fail "$flag at np $*, CROWN_FAKE_HOSTS=$hosts"; }
  got=$(checksum_of gpu.out)
  [ "$got" = "$ref" ] ||
    { cat gpu.out; fail "$flag at np $*, CROWN_FAKE_HOSTS=$hosts: checksum '$got', the CPU's $ref"; }
  echo "$flag np $*, CROWN_FAKE_HOSTS=$hosts: checksum $got, bitwise the CPU's ($(sed -n 's/^time //p' gpu.out))"
done

# 2. Checkpoints written by --gpu, resumed by --gpu at another rank count and by the CPU.
if run 1 "${args[@]}" --iterations 2 --checkpoint-every 1 --checkpoint-dir probe.ck \
  > probe_ck.out 2>&1; then
  run 2 $flag "${args[@]}" --checkpoint-every 15 --checkpoint-dir ck > ck.out 2>&1 ||
    { cat ck.out; fail "$flag with checkpoints"; }
  [ "$(checksum_of ck.out)" = "$ref" ] || fail "$flag with checkpoints: checksum differs"
  cp -r ck ck_cpu
  run 3 $flag "${args[@]}" --checkpoint-dir ck --resume > resume.out 2>&1 ||
    { cat resume.out; fail "$flag --resume at 3 ranks"; }
  grep -q "resumed from .* at iteration 30" resume.out || { cat resume.out; fail "not resumed at 30"; }
  [ "$(checksum_of resume.out)" = "$ref" ] || fail "$flag --resume at 3 ranks: checksum differs"
  run 2 "${args[@]}" --checkpoint-dir ck_cpu --resume > resume_cpu.out 2>&1 ||
    { cat resume_cpu.out; fail "the CPU resuming $flag's checkpoint"; }
  [ "$(checksum_of resume_cpu.out)" = "$ref" ] || fail "the CPU resuming $flag's checkpoint: checksum differs"
  echo "$flag checkpoints (np 2, every 15) resumed at iteration 30 by $flag at np 3 and by the CPU at np 2: checksum $ref"

  # 3. SIGUSR1 during a long --gpu run: every rank checkpoints after one iteration, exit 75.
  long=(--n 200 --iterations 20000 --checkpoint-every 1000) # far from the steady state
  run 2 "${long[@]}" > long_cpu.out 2>&1 || { cat long_cpu.out; fail "the long CPU run"; }
  "$mpiexec" -np 2 --oversubscribe "$heat" $flag "${long[@]}" --checkpoint-dir sig > sig.out 2>&1 &
  job=$! # mpirun itself: it passes SIGUSR1 on to every rank
  for _ in $(seq 300); do # the first checkpoint, then the signal while it runs on
    ls sig 2> /dev/null | grep -q . && break
    sleep 0.1
  done
  kill -USR1 $job
  wait $job
  rc=$?
  if [ $rc -eq 0 ] && ! grep -q "checkpointed after" sig.out; then
    echo "note: the run ended before the signal; stop not checked"
  else
    [ $rc -eq 75 ] || { cat sig.out; fail "$flag on SIGUSR1: exit $rc, not 75"; }
    grep -q "SIGUSR1: checkpointed after iteration" sig.out || { cat sig.out; fail "no checkpoint on SIGUSR1"; }
    run 2 $flag "${long[@]}" --checkpoint-dir sig --resume > sig_resume.out 2>&1 ||
      { cat sig_resume.out; fail "$flag --resume after SIGUSR1"; }
    [ "$(checksum_of sig_resume.out)" = "$(checksum_of long_cpu.out)" ] ||
      fail "after SIGUSR1 and --resume: checksum $(checksum_of sig_resume.out), the CPU's $(checksum_of long_cpu.out)"
    echo "$flag: $(grep -o 'SIGUSR1: checkpointed after iteration [0-9]*' sig.out), exit 75;" \
      "--resume ends bitwise the CPU's $(checksum_of long_cpu.out)"
  fi
else
  echo "checkpoints not checked: $(grep -m1 -i "hdf5\|checkpoint" probe_ck.out)"
fi
echo "PASS heat2d gpu"
