#!/usr/bin/env bash
# tests/apps/heat2d_fortran_checksums.sh HEAT2D_FORTRAN HEAT2D MPIEXEC
# heat2d_fortran (native coarray Fortran on libcrown_caf) must print bitwise the C++
# heat2d's checksum (the same %.17g text) at every image count and grid shape, uneven
# splits included, and through the active-message transport.
set -euo pipefail
fortran=$1 heat2d=$2 mpiexec=$3
args=(--n 61 --iterations 50)
checksum() { # PROGRAM NP [options...]
  local program=$1 np=$2
  shift 2
  "$mpiexec" -np "$np" --oversubscribe "$program" "${args[@]}" "$@" | sed -n 's/^checksum //p'
}
reference=$(checksum "$heat2d" 1)
[ -n "$reference" ] || { echo "no checksum from heat2d at np=1"; exit 1; }
echo "heat2d np=1: checksum $reference"
failed=0
for run in "1" "2" "2 --mesh 2x1" "3" "3 --mesh 3x1" "4" "4 --mesh 1x4" "4 --mesh 4x1"; do
  got=$(checksum "$fortran" $run) || got="(the run failed)"
  if [ "$got" = "$reference" ]; then
    echo "heat2d_fortran np=$run: same"
  else
    echo "heat2d_fortran np=$run: checksum '$got' differs from heat2d's '$reference'"
    failed=1
  fi
done
got=$(CROWN_SHM=0 CROWN_TRANSPORT=am checksum "$fortran" 3 --mesh 3x1) || got="(the run failed)"
[ "$got" = "$reference" ] && echo "np=3 over am: same" || { echo "am: '$got'"; failed=1; }
exit $failed
