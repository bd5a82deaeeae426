#!/usr/bin/env bash
# self_check.sh PYTHON SNIPPETS_PY CONFIG FIXTURE_DIR: the snippet test, run on a fixture,
# runs a fragment, compiles a compile-only block, and fails naming the Markdown file and
# line of a snippet that does not compile and of a program that exits non-zero.
set -uo pipefail
out=$("$1" "$2" "$3" --source-dir "$4" --jobs 2 2>&1)
rc=$?
echo "$out"
fail() { echo "SELF-CHECK FAILED: $1"; exit 1; }
[ $rc -ne 0 ] || fail "the fixture's broken snippets passed"
grep -q '^4 snippets in 2 files: 3 built (1 compile-only), 2 ran' <<< "$out" || fail "counts"
grep -q '^FAILED: docs/broken.md:4: the cpp snippet does not compile' <<< "$out" ||
  fail "no failure naming docs/broken.md:4"
grep -q 'docs/broken.md:8:[0-9]*: error: .undefined_name' <<< "$out" ||
  fail "the compiler's message does not point into the Markdown file"
grep -q '^FAILED: README.md:19: the snippet exited with 3 on 3 ranks' <<< "$out" ||
  fail "no failure naming README.md:19"
[ "$(grep -c '^FAILED' <<< "$out")" -eq 2 ] || fail "the fragment or the compile-only block failed"
echo "self-check passed"
