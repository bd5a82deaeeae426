#!/usr/bin/env bash
# default_generator_test.sh SOURCE [TARGET]
# Configures SOURCE the plainest documented way, `cmake -S . -B build` with the default
# generator (Unix Makefiles) and no options, into a scratch directory, then builds TARGET
# there when one is given. CI's builds use the Ninja presets, which generate where the
# Makefile generator once refused (libcrown asked for a "CUDA20" dialect).
set -euo pipefail
source=$1 target=${2:-}
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
unset CMAKE_GENERATOR # the default generator, whatever the caller's environment prefers

cmake -S "$source" -B "$work" > "$work/configure.log" 2>&1 || {
  cat "$work/configure.log"
  echo "default generator: configuring failed"
  exit 1
}
grep -q '^CMAKE_GENERATOR:INTERNAL=Unix Makefiles$' "$work/CMakeCache.txt" || {
  grep '^CMAKE_GENERATOR:' "$work/CMakeCache.txt"
  echo "default generator: expected Unix Makefiles"
  exit 1
}
if [ -n "$target" ]; then
  cmake --build "$work" --target "$target" > "$work/build.log" 2>&1 || {
    cat "$work/build.log"
    echo "default generator: building $target failed"
    exit 1
  }
fi
echo "default generator: Unix Makefiles configured${target:+ and built $target}"
