#!/usr/bin/env bash
# heat2d after a kill, resumed from its checkpoints: the checksum is bitwise that of an
# uninterrupted run, at the same rank count (4) and at others (3, 2); a rank killed while
# a checkpoint is written leaves the previous one intact; crown-run reruns a killed job
# with --resume; the work lost (iterations run twice) is at most one interval.
#   heat2d_resume.sh <crown-heat2d> <mpirun> <crown-run> <workdir>
set -u
heat=$1 mpirun=$2 crownrun=$3 work=$4
n=96 iters=40 every=10
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
fail() { echo "FAIL: $*" >&2; exit 1; }
run() { # np, extra args...
  local np=$1; shift
  "$mpirun" -np "$np" --oversubscribe "$heat" --n $n --iterations $iters "$@"
}
checksum_of() { grep '^checksum ' "$1" | awk '{print $2}'; }

run 4 > ref.out 2>&1 || { cat ref.out; fail "uninterrupted run"; }
ref=$(checksum_of ref.out)
[ -n "$ref" ] || fail "no checksum in the uninterrupted run"
echo "uninterrupted: checksum $ref"

# 1. Rank 1 killed while the second checkpoint (iteration 20) is written.
CROWN_FAULT=kill:rank=1:at=checkpoint:count=2 run 4 --checkpoint-every $every --checkpoint-dir ck \
  > kill.out 2>&1 && { cat kill.out; fail "the killed run succeeded"; }
grep -q "rank 1 kills itself (SIGKILL) at checkpoint" kill.out || { cat kill.out; fail "no kill at checkpoint"; }
[ -f ck/step-000000000010.h5 ] || { ls -la ck; fail "the previous checkpoint (10) is gone"; }
[ ! -f ck/step-000000000020.h5 ] || fail "the checkpoint being written (20) appeared under its final name"
if command -v h5dump > /dev/null; then
  h5dump -H ck/step-000000000010.h5 | grep -q 'DATASET "u"' || fail "h5dump does not show dataset u"
fi
echo "killed while writing checkpoint 20: checkpoint 10 intact"

# 2. Resume at the same rank count: bitwise the same checksum; one interval redone.
run 4 --checkpoint-every $every --checkpoint-dir ck --resume > resume4.out 2>&1 || { cat resume4.out; fail "resume at 4"; }
grep -q "resumed from ck/step-000000000010.h5 at iteration 10" resume4.out || { cat resume4.out; fail "not resumed from 10"; }
[ "$(checksum_of resume4.out)" = "$ref" ] || fail "resume at 4 ranks: checksum $(checksum_of resume4.out), expected $ref"
echo "resumed at 4 ranks from iteration 10 (killed at 20: $((20 - 10)) iterations redone, one interval): checksum $ref"

# 3. Resume at other rank counts from a checkpoint written by 4 (iteration 30).
for np in 3 2; do
  cp -r ck ck$np
  run $np --checkpoint-dir ck$np --resume > resume$np.out 2>&1 || { cat resume$np.out; fail "resume at $np"; }
  grep -q "at iteration 30" resume$np.out || { cat resume$np.out; fail "resume at $np not from 30"; }
  [ "$(checksum_of resume$np.out)" = "$ref" ] || fail "resume at $np ranks: checksum $(checksum_of resume$np.out), expected $ref"
  echo "resumed at $np ranks from iteration 30 written by 4: checksum $ref"
done

# 4. An invalid newest checkpoint is reported and the one before it used.
printf 'garbage' | dd of=ck/step-000000000030.h5 bs=1 seek=4096 conv=notrunc status=none
dd if=/dev/zero of=ck/step-000000000030.h5 bs=1 seek=100000 count=4096 conv=notrunc status=none
run 2 --checkpoint-dir ck --resume > invalid.out 2>&1 || { cat invalid.out; fail "resume past an invalid newest"; }
grep -q "skipping an invalid checkpoint: .*step-000000000030.h5" invalid.out || { cat invalid.out; fail "invalid newest not reported"; }
grep -q "at iteration 20" invalid.out || { cat invalid.out; fail "not resumed from 20"; }
[ "$(checksum_of invalid.out)" = "$ref" ] || fail "resume past an invalid newest: checksum differs"
echo "invalid newest (30) reported, resumed from 20: checksum $ref"

# 5. crown-run: killed at iteration 27, rerun with --resume from 20 (7 iterations redone).
CROWN_FAULT=kill:rank=1:at=step:count=27 "$crownrun" --retries 2 -- "$mpirun" -np 4 --oversubscribe \
  "$heat" --n $n --iterations $iters --checkpoint-every $every --checkpoint-dir ckrun > run.out 2>&1 \
  || { cat run.out; fail "crown-run"; }
grep -q "crown-run: attempt 1 failed" run.out || { cat run.out; fail "crown-run did not rerun"; }
grep -q "resumed from ckrun/step-000000000020.h5 at iteration 20" run.out || { cat run.out; fail "crown-run: not resumed from 20"; }
[ "$(checksum_of run.out)" = "$ref" ] || fail "crown-run: checksum $(checksum_of run.out), expected $ref"
echo "crown-run: killed at iteration 27, resumed from 20 ($((27 - 20)) iterations redone): checksum $ref"

# 6. crown-run gives up after its retries, with the job's status.
CROWN_FAULT=kill:rank=1:at=startup "$crownrun" --retries 1 -- "$mpirun" -np 2 --oversubscribe \
  "$heat" --n $n --iterations 2 > giveup.out 2>&1 && fail "crown-run succeeded on a job that always dies"
grep -q "attempt 2 failed (exit [0-9]*); no retries left" giveup.out || { cat giveup.out; fail "crown-run did not give up"; }
echo "crown-run gives up after its retries"
