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
echo "both consumers built and ran against the installed tree"
