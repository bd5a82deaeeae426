#!/usr/bin/env bash
# run_fuzzer.sh TARGET SEED_DIR SEED_SCRIPT SECONDS — fresh seeds (SEED_SCRIPT writes
# SEED_DIR and SEED_DIR-controller; a name ending in -controller is taken as is), then
# fuzz for SECONDS
# on a scratch copy of the corpus; non-zero exit (and the crashing input) on a finding.
# CROWN_FUZZ_SECONDS in the environment overrides SECONDS (scripts/fuzz).
set -euo pipefail
target=$1 seeds=$2 make_seeds=$3 seconds=${CROWN_FUZZ_SECONDS:-$4} # the environment wins
python3 "$make_seeds" "${seeds%-controller}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$seeds"/* "$work"/
cd "$work"
"$target" -max_total_time="$seconds" -max_len=4096 -print_final_stats=1 "$work"
