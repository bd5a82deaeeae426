# Sourced by the install tests (bash, set -euo pipefail): a scratch directory $work that
# is removed on exit, and helpers. The caller sets $mpiexec before running programs.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# install_crown BUILD_DIR: installs that build into $work/prefix.
install_crown() {
  cmake --install "$1" --prefix "$work/prefix" > "$work/install.log"
}

# run2 PROGRAM [ARGS...]: runs it on 2 ranks; its output is printed and kept in $out.
run2() {
  out=$("$mpiexec" -np 2 --oversubscribe "$@")
  echo "$out"
}

# expect REGEX...: each REGEX matches a line of the last run's output.
expect() {
  local re
  for re in "$@"; do
    grep -Eq "$re" <<< "$out" || { echo "FAILED: no line matches /$re/"; return 1; }
  done
}
