#!/usr/bin/env bash
# consumer_test.sh BUILD_DIR CONSUMER_SOURCE MPIEXEC CXX [CXXFLAGS]
# (CXXFLAGS: the sanitizer flags when Crown itself was built with them)
set -euo pipefail
build=$1 source=$2 mpiexec=$3 cxx=$4 cxxflags=${5:-}
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
expected='consumer: 2 ranks in mesh\{hosts=1,procs=2\}, rank sum 1'

# cmake_consumer SOURCE BUILD [cmake options...]: configures and builds against the prefix.
cmake_consumer() {
  local src=$1 dir=$2
  shift 2
  cmake -S "$src" -B "$dir" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_CXX_COMPILER="$cxx" "$@" \
    > "$dir.configure.log" || { cat "$dir.configure.log"; exit 1; }
  cmake --build "$dir" > "$dir.build.log" || { cat "$dir.build.log"; exit 1; }
}

install_crown "$build"

echo "== find_package(crown)"
cmake_consumer "$source" "$work/cmake" -DCMAKE_CXX_FLAGS="$cxxflags"
run2 "$work/cmake/consumer"
expect "$expected"

echo "== pkg-config crown"
pc_dir=$(dirname "$(find "$work/prefix" -name crown.pc | head -1)")
flags=$(PKG_CONFIG_PATH="$pc_dir" pkg-config --cflags --libs crown)
# MPI's C library only: Open MPI's deprecated C++ bindings (ompi-cxx) stay out.
[[ $flags != *mpi_cxx* ]] || { echo "FAILED: crown.pc links MPI's C++ bindings: $flags"; exit 1; }
"$cxx" $cxxflags "$source/main.cpp" $flags -o "$work/consumer_pc"
run2 "$work/consumer_pc"
expect "$expected"
if [ -f "$work/prefix/include/crown/fortran/crown.mod" ]; then
  fexpect='fortran consumer: 2 images, sum 3.0'
  echo "== find_package(crown) from Fortran: crown::fortran"
  cmake_consumer "$source/../fortran_consumer" "$work/fortran" -DCMAKE_Fortran_FLAGS="$cxxflags" \
    -DCMAKE_EXE_LINKER_FLAGS="$cxxflags"
  run2 "$work/fortran/fortran_consumer"
  expect "$fexpect"
  echo "== plain gfortran with pkg-config crown-fortran"
  fflags=$(PKG_CONFIG_PATH="$pc_dir" pkg-config --cflags --libs crown-fortran)
  gfortran $cxxflags "$source/../fortran_consumer/main.f90" $fflags -o "$work/fortran_plain"
  run2 "$work/fortran_plain"
  expect "$fexpect"
  if [ -x "$work/prefix/bin/crown-fortran" ]; then
    echo "== crown-fortran (native coarrays on libcrown_caf)"
    FC="gfortran $cxxflags" "$work/prefix/bin/crown-fortran" \
      "$source/../../fortran/caf_checks.f90" "$source/../../fortran/caf_basics.f90" \
      -J "$work" -o "$work/caf_basics"
    run2 "$work/caf_basics"
    expect "PASS caf_basics"
  fi
fi
echo "every consumer built and ran against the installed tree"
