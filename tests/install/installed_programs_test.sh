#!/usr/bin/env bash
# installed_programs_test.sh BUILD_DIR MPIEXEC
# Installs the build into a scratch prefix and runs its programs from there as a user
# would: LD_LIBRARY_PATH unset, so they must find libcrown through their RUNPATH
# ($ORIGIN/../lib). Also checks that every installed program is named crown-*, and that
# the licence is installed.
set -euo pipefail
build=$1 mpiexec=$2
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
install_crown "$build"
bin=$work/prefix/bin
unset LD_LIBRARY_PATH

echo "== bin/: crown-* programs, each with a RUNPATH relative to itself"
for program in "$bin"/*; do
  name=${program##*/}
  [[ $name == crown-* ]] || { echo "FAILED: bin/$name lacks the crown- prefix"; exit 1; }
  [ "$(head -c 4 "$program")" = $'\x7fELF' ] || continue # a script (crown-fortran)
  case $name in # built by other compiler wrappers, without libcrown
  crown-shmem-baseline | crown-caf-bench-opencoarrays) continue ;;
  esac
  runpath=$(readelf -d "$program" | grep -E '\((RUNPATH|RPATH)\)' || true)
  [[ $runpath == *'(RUNPATH)'*'$ORIGIN/../lib'* ]] || {
    echo "FAILED: bin/$name: no RUNPATH \$ORIGIN/../lib: ${runpath:-none}"
    exit 1
  }
  echo "bin/$name: $runpath"
done
[ -f "$work/prefix/share/doc/crown/LICENSE" ] || { echo "FAILED: no share/doc/crown/LICENSE"; exit 1; }

echo "== crown-info"
run2 "$bin/crown-info"
expect "crown [0-9.]+: 2 ranks on 1 host, MPI_THREAD_MULTIPLE, world mesh\{hosts=1,procs=2\}" \
  "^rank 0: host=[^ ]+ local=0/2 .*transports=shm" "^rank 1: host=[^ ]+ local=1/2 "

if [ -x "$bin/crown-train" ]; then
  echo "== crown-train (libcrown_parallel found from bin/)"
  run2 "$bin/crown-train" --plan dp=2 --steps 3 --batch 2 --context 16 --channels 32 --heads 2 \
    --blocks 1 --sample 0
  expect "^crown-train: dp=2 on 2 ranks" "^trained 3 steps"
fi

if [ -x "$bin/crown-plan" ]; then
  echo "== crown-plan (libcrown_plan found from bin/, its examples from share/crown/plan-examples)"
  ex=$work/prefix/share/crown/plan-examples
  "$bin/crown-plan" --model "$ex/gpt-1.7b.json" --cluster "$ex/dgx-a100-4.json" \
    --training "$ex/megatron-1.7b.json" --top 1 | grep -E '^1 +dp=32' ||
    { echo "FAILED: crown-plan from the install tree printed no plan"; exit 1; }
fi

if [ -x "$bin/crown-trace-merge" ]; then
  echo "== crown-trace-merge (CROWN_TRACE's files from the installed crown-info, merged)"
  CROWN_TRACE=$work/trace run2 "$bin/crown-info"
  "$bin/crown-trace-merge" "$work/trace" | grep -E '^crown-trace-merge: 2 ranks' ||
    { echo "FAILED: the installed crown-trace-merge did not merge 2 ranks' traces"; exit 1; }
fi

# heat2d's checksum is bitwise the same for any rank count: the installed program on 2
# ranks must print the build tree's 1-rank figure.
heat2d=(--n 64 --iterations 20)
reference=$("$build/apps/crown-heat2d" "${heat2d[@]}" | sed -n 's/^checksum //p')
echo "== crown-heat2d (build tree, 1 rank: checksum $reference)"
run2 "$bin/crown-heat2d" "${heat2d[@]}"
expect "^heat2d 64 x 64, 20 iterations on a 1x2 mesh" "^checksum ${reference//./\\.}$"
if [ -x "$bin/crown-heat2d-fortran" ]; then
  echo "== crown-heat2d-fortran (libcrown_caf and libcrown found from bin/)"
  run2 "$bin/crown-heat2d-fortran" "${heat2d[@]}"
  expect "^checksum ${reference//./\\.}$"
fi
echo "the installed programs ran from the install tree without LD_LIBRARY_PATH"
