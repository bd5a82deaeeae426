#!/usr/bin/env bash
# tests/heat2d/fortran_resume.sh HEAT2D_FORTRAN MPIEXEC WORKDIR
# crown-heat2d-fortran's checkpoints and stop signals (heat2d_checkpoint.f90), at 3 images
# (1x3, uneven blocks): a run checkpointing every 10 iterations keeps the newest two;
# --resume from them ends bitwise the uninterrupted checksum; SIGUSR1 (mpirun passes it to
# every image) -> every image checkpoints after the same iteration, exit 75 -> --resume,
# bitwise; resuming at another image count, a damaged file and a bad CROWN_STOP_GRACE are
# refused with a message naming the image and the file (or the setting).
set -u
heat=$1 mpiexec=$2 work=$3
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
fail() { echo "FAIL: $*" >&2; exit 1; }
run() { # NP [options...]
  local np=$1
  shift
  "$mpiexec" -np "$np" --oversubscribe "$heat" --n 61 "$@"
}
checksum_of() { sed -n 's/^checksum //p' "$1"; }

run 3 --iterations 40 > whole.out 2>&1 || { cat whole.out; fail "the uninterrupted run"; }
ref=$(checksum_of whole.out)
[ -n "$ref" ] || fail "no checksum"
run 3 --iterations 35 --checkpoint-every 10 --checkpoint-dir ck > part.out 2>&1 ||
  { cat part.out; fail "the run with checkpoints"; }
[ "$(ls ck | tr '\n' ' ')" = "heat2d-000000000020.00001 heat2d-000000000020.00002 heat2d-000000000020.00003 heat2d-000000000030.00001 heat2d-000000000030.00002 heat2d-000000000030.00003 latest " ] ||
  { ls ck; fail "not the newest two checkpoints (20, 30) and latest"; }
run 3 --iterations 40 --checkpoint-dir ck --resume > resume.out 2>&1 || { cat resume.out; fail "--resume"; }
grep -q "^resumed from ck/heat2d-000000000030.00001 at iteration 30$" resume.out || { cat resume.out; fail "not resumed at 30"; }
[ "$(checksum_of resume.out)" = "$ref" ] || fail "--resume: checksum $(checksum_of resume.out), expected $ref"
echo "checkpoints every 10 (newest two kept), resumed at 30: checksum $ref, bitwise"

# SIGUSR1 to mpirun, which passes it to every image. n = 200 and 20000 iterations: far
# from the steady state (slowest mode's time constant about 10000 iterations), so a wrong
# resume would show in the checksum.
run 3 --n 200 --iterations 20000 > long.out 2>&1 || { cat long.out; fail "the long run"; }
"$mpiexec" -np 3 --oversubscribe "$heat" --n 200 --iterations 20000 --checkpoint-every 1000 \
  --checkpoint-dir sig > sig.out 2>&1 &
job=$!
for _ in $(seq 300); do # the first checkpoint, then the signal while it runs on
  [ -f sig/latest ] && break
  sleep 0.05
done
kill -USR1 $job
wait $job
rc=$?
[ $rc -eq 75 ] || { cat sig.out; fail "on SIGUSR1: exit $rc, not 75 (did the run end first?)"; }
grep -q "^heat2d_fortran: SIGUSR1: checkpointed after iteration [0-9]* in sig; stopping (exit 75)" sig.out ||
  { cat sig.out; fail "no checkpoint on SIGUSR1"; }
run 3 --n 200 --iterations 20000 --checkpoint-every 1000 --checkpoint-dir sig --resume > sig2.out 2>&1 ||
  { cat sig2.out; fail "--resume after SIGUSR1"; }
[ "$(checksum_of sig2.out)" = "$(checksum_of long.out)" ] || fail "after SIGUSR1: checksum differs"
echo "$(grep -o 'SIGUSR1: checkpointed after iteration [0-9]*' sig.out), exit 75; $(grep -o 'resumed from .*' sig2.out): checksum $(checksum_of long.out), bitwise"

# Refusals.
run 2 --iterations 40 --checkpoint-dir ck --resume > other.out 2>&1 && fail "resumed at 2 images from 3"
grep -q "heat2d_fortran: image 1: --resume: ck/heat2d-000000000030.00001: written for n = 61 on a 1x3 mesh of 3 images (image 1), not n = 61 on 1x2 of 2" other.out ||
  { cat other.out; fail "resume at another image count: no clear message"; }
truncate -s 100 ck/heat2d-000000000030.00002
run 3 --iterations 40 --checkpoint-dir ck --resume > short.out 2>&1 && fail "resumed from a truncated file"
grep -q "heat2d_fortran: image 2: --resume: ck/heat2d-000000000030.00002: .*End of file" short.out ||
  { cat short.out; fail "a truncated file: no clear message"; }
CROWN_STOP_GRACE=soon run 1 --iterations 4 --checkpoint-every 2 --checkpoint-dir g > grace.out 2>&1
rc=$?
# (the runtime's configuration refuses it at start-up, before the handlers are installed)
[ $rc -ne 0 ] && grep -q "CROWN_STOP_GRACE: invalid value 'soon'" grace.out ||
  { cat grace.out; fail "a bad CROWN_STOP_GRACE: exit $rc"; }
echo "refused: another image count, a truncated file, CROWN_STOP_GRACE=soon (exit $rc)"
echo "PASS heat2d_fortran resume"
