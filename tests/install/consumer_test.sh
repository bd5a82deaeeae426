#!/usr/bin/env bash
# consumer_test.sh BUILD_DIR CONSUMER_SOURCE MPIEXEC CXX [CXXFLAGS]
# (CXXFLAGS: the sanitizer flags when Crown itself was built with them)
set -euo pipefail
build=$1 source=$2 mpiexec=$3 cxx=$4 cxxflags=${5:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
expect='consumer: 2 ranks in mesh\{hosts=1,procs=2\}, rank sum 1'

cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"

echo "== find_package(crown)"
cmake -S "$source" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_CXX_FLAGS="$cxxflags" \
  > "$work/configure.log" || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/cmake" > "$work/build.log" || { cat "$work/build.log"; exit 1; }
out=$("$mpiexec" -np 2 --oversubscribe "$work/cmake/consumer")
echo "$out"
grep -Eq "$expect" <<< "$out"

echo "== pkg-config crown"
pc_dir=$(dirname "$(find "$work/prefix" -name crown.pc | head -1)")
flags=$(PKG_CONFIG_PATH="$pc_dir" pkg-config --cflags --libs crown)
"$cxx" $cxxflags "$source/main.cpp" $flags -o "$work/consumer_pc"
out=$("$mpiexec" -np 2 --oversubscribe "$work/consumer_pc")
echo "$out"
grep -Eq "$expect" <<< "$out"
if [ -f "$work/prefix/include/crown/fortran/crown.mod" ]; then
  fexpect='fortran consumer: 2 images, sum 3.0'
  echo "== find_package(crown) from Fortran: crown::fortran"
  cmake -S "$source/../fortran_consumer" -B "$work/fortran" -DCMAKE_PREFIX_PATH="$work/prefix" \
    -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_Fortran_FLAGS="$cxxflags" -DCMAKE_EXE_LINKER_FLAGS="$cxxflags" \
    > "$work/fconfigure.log" || { cat "$work/fconfigure.log"; exit 1; }
  cmake --build "$work/fortran" > "$work/fbuild.log" || { cat "$work/fbuild.log"; exit 1; }
  out=$("$mpiexec" -np 2 --oversubscribe "$work/fortran/fortran_consumer")
  echo "$out"
  grep -Eq "$fexpect" <<< "$out"
  echo "== plain gfortran with pkg-config crown-fortran"
  fflags=$(PKG_CONFIG_PATH="$pc_dir" pkg-config --cflags --libs crown-fortran)
  gfortran $cxxflags "$source/../fortran_consumer/main.f90" $fflags -o "$work/fortran_plain"
  out=$("$mpiexec" -np 2 --oversubscribe "$work/fortran_plain")
  echo "$out"
  grep -Eq "$fexpect" <<< "$out"
  if [ -x "$work/prefix/bin/crown-fortran" ]; then
    echo "== crown-fortran (native coarrays on libcrown_caf)"
    FC="gfortran $cxxflags" "$work/prefix/bin/crown-fortran" \
      "$source/../../fortran/caf_checks.f90" "$source/../../fortran/caf_basics.f90" \
      -J "$work" -o "$work/caf_basics"
    out=$("$mpiexec" -np 2 --oversubscribe "$work/caf_basics")
    echo "$out"
    grep -q "PASS caf_basics" <<< "$out"
  fi
fi
echo "every consumer built and ran against the installed tree"
