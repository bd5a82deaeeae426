#!/bin/bash
# CROWN_TRACE end to end at NP ranks: usage run_trace_test.sh MPIEXEC NP WORKLOAD MERGE PYTHON [--progress]
# (CROWN_FAKE_HOSTS from the environment). Traced run -> per-rank files checked -> merged
# and checked; unset -> nothing written; an unwritable directory -> each rank's error
# names its rank and the path.
set -euo pipefail
mpiexec=$1 np=$2 workload=$3 merge=$4 python=$5 progress=${6:-}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run() { "$mpiexec" -np "$np" --oversubscribe "$@"; }

# 1. Traced: one file per rank, each with the workload's events.
CROWN_TRACE=$work/trace run "$workload"
"$python" "$here/check_trace.py" ranks "$np" "$work/trace" $progress
out=$("$merge" "$work/trace" -o "$work/merged.json")
echo "$out"
grep -q "crown-trace-merge: $np ranks, [0-9]* events" <<<"$out"
grep -q "clock error bound: [0-9.]* us" <<<"$out"
"$python" "$here/check_trace.py" merged "$np" "$work/merged.json" $progress
if [ "$np" -gt 1 ]; then # a rank's file missing: the merge names it and fails
  mkdir "$work/partial"
  cp "$work/trace/crown-trace.0.json" "$work/partial/"
  if msg=$("$merge" "$work/partial" 2>&1); then
    echo "crown-trace-merge merged a job without its other ranks: $msg" >&2
    exit 1
  fi
  grep -q "the job had $np ranks but no file holds rank 1" <<<"$msg" || { echo "$msg" >&2; exit 1; }
  "$merge" --partial "$work/partial" | grep -q "no file holds rank 1.* (--partial: merging the others)"
fi

# A wait that ends the job (CROWN_WAIT_TIMEOUT): the aborting rank still writes its file,
# the wait it died in marked unfinished (np 2 only: each run costs about 3 s).
if [ "$np" -eq 2 ]; then
  if CROWN_TRACE=$work/stall CROWN_WAIT_TIMEOUT=1 run "$workload" --stall >/dev/null 2>&1; then
    echo "the stalled run did not end with an error" >&2
    exit 1
  fi
  "$python" - "$work/stall/crown-trace.0.json" <<'PY'
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
open_ = [e for e in events if e.get("args", {}).get("unfinished")]
assert any(e["name"] == "sync_all" for e in open_), f"no unfinished sync_all: {open_}"
print("stalled rank 0 wrote", len(events), "events; unfinished:", [e["name"] for e in open_])
PY
fi

# 2. Unset: the run writes nothing (it runs in an empty directory).
mkdir "$work/off"
(cd "$work/off" && env -u CROWN_TRACE "$mpiexec" -np "$np" --oversubscribe "$workload")
if [ -n "$(ls -A "$work/off")" ]; then
  echo "CROWN_TRACE unset, yet the run wrote: $(ls -A "$work/off")" >&2
  exit 1
fi

# 3. A directory no rank can write (under a regular file): every rank names itself and the path.
touch "$work/file"
set +e
err=$(CROWN_TRACE=$work/file/sub run "$workload" 2>&1)
status=$?
set -e
if [ $status -eq 0 ]; then
  echo "an unwritable CROWN_TRACE directory did not fail the run" >&2
  exit 1
fi
# mpirun ends the other ranks once one exits, so not every rank may get to print: each
# error printed must name its own rank and file, and there must be one.
errors=$(grep "crown::config_error: rank" <<<"$err" || true)
if [ -z "$errors" ]; then
  echo "no rank named the unwritable directory; the output was:" >&2
  echo "$err" >&2
  exit 1
fi
while read -r line; do
  r=$(sed -n 's/^crown::config_error: rank \([0-9]*\):.*/\1/p' <<<"$line")
  expected="crown::config_error: rank $r: CROWN_TRACE=$work/file/sub: cannot create the directory for the trace file $work/file/sub/crown-trace.$r.json: Not a directory"
  if [ "$line" != "$expected" ]; then
    echo "unclear error: '$line', expected '$expected'" >&2
    exit 1
  fi
done <<<"$errors"
echo "trace test at $np ranks passed"
