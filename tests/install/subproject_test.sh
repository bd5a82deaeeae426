#!/usr/bin/env bash
# subproject_test.sh CONSUMER_SOURCE CROWN_SOURCE MPIEXEC
# Configures CONSUMER_SOURCE (tests/install/subproject), a project that adds Crown with
# add_subdirectory and sets no build type, builds its program and runs it on 2 ranks.
# Its configure step fails if Crown forced a build type or added its tests or apps; here
# the cache must hold no build type and the build no test or app targets of Crown's.
set -euo pipefail
consumer=$1 crown=$2 mpiexec=$3
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
unset CMAKE_GENERATOR CMAKE_BUILD_TYPE

cmake -S "$consumer" -B "$work/build" -DCROWN_SOURCE_DIR="$crown" \
  > "$work/configure.log" 2>&1 || { cat "$work/configure.log"; exit 1; }
grep -qx 'CMAKE_BUILD_TYPE:STRING=' "$work/build/CMakeCache.txt" || {
  grep '^CMAKE_BUILD_TYPE' "$work/build/CMakeCache.txt"
  echo "FAILED: the build type was set, not left empty"
  exit 1
}
targets=$(cmake --build "$work/build" --target help)
if grep -Eq '(test_|crown-info|crown-heat2d|crown_test_harness)' <<< "$targets"; then
  echo "FAILED: Crown's tests or apps are targets of the consumer's build"
  exit 1
fi
# Only the program (libcrown and ring): the rest of Crown's libraries would double the time.
cmake --build "$work/build" --target ring --parallel 2 > "$work/build.log" 2>&1 || {
  cat "$work/build.log"
  exit 1
}
run2 "$work/build/ring"
expect '^subproject: 2 images, ring put, 0 wrong elements$'
