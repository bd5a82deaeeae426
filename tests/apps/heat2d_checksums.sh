#!/usr/bin/env bash
# tests/apps/heat2d_checksums.sh HEAT2D MPIEXEC
# heat2d's checksum must be bitwise the same for every rank count and mesh shape, with
# and without the overlapped exchange, and through the active-message transport; and
# the PNG it writes must be a PNG of the right size.
set -euo pipefail
heat2d=$1 mpiexec=$2
args=(--n 67 --iterations 40)
checksum() { # NP [heat2d options...]
  local np=$1
  shift
  "$mpiexec" -np "$np" --oversubscribe "$heat2d" "${args[@]}" "$@" | sed -n 's/^checksum //p'
}
reference=$(checksum 1)
[ -n "$reference" ] || { echo "no checksum at np=1"; exit 1; }
echo "np=1: checksum $reference"
failed=0
for run in "2 --mesh 1x2" "2 --mesh 2x1" "3 --mesh 1x3" "3 --mesh 3x1 --no-overlap" \
  "4 --mesh 2x2" "4 --mesh 1x4" "4 --mesh 4x1" "4 --no-overlap"; do
  got=$(checksum $run)
  if [ "$got" = "$reference" ]; then
    echo "np=$run: same"
  else
    echo "np=$run: checksum '$got' differs from '$reference'"
    failed=1
  fi
done
got=$(CROWN_SHM=0 CROWN_TRANSPORT=am checksum 3 --mesh 3x1)
[ "$got" = "$reference" ] && echo "np=3 over am: same" || { echo "am: '$got'"; failed=1; }
png=$(mktemp --suffix=.png)
trap 'rm -f "$png"' EXIT
"$mpiexec" -np 2 --oversubscribe "$heat2d" "${args[@]}" --png "$png" > /dev/null
# PNG signature, then IHDR with width and height 67 (0x43).
if [ "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" != 89504e470d0a1a0a ] ||
  [ "$(dd if="$png" bs=1 skip=16 count=8 status=none | od -An -tx1 | tr -d ' \n')" != 0000004300000043 ]; then
  echo "the PNG is not a 67 x 67 PNG"
  failed=1
fi
exit $failed
