#!/usr/bin/env bash
# crown-plan end to end: every example set plans (table and --json, --top honoured), bad files
# fail naming file, field and value, and a model that fits no plan fails listing why.
# usage: crown_plan_runs.sh CROWN_PLAN EXAMPLES_DIR
set -euo pipefail
plan=$1
ex=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# model cluster training: each example set
sets=("gpt-39b dgx-a100-64 megatron-39b" "mlp-layers workstation-2x4 small-sgd"
      "gpt-1.7b dgx-a100-4 megatron-1.7b")
for s in "${sets[@]}"; do
  read -r m c t <<< "$s"
  args=(--model "$ex/$m.json" --cluster "$ex/$c.json" --training "$ex/$t.json")
  out=$("$plan" "${args[@]}" --top 3) || fail "$s: exit $?"
  head -5 <<< "$out" # (echo | head would die of SIGPIPE under pipefail once head exits)
  grep -Eq '^1 +dp=[0-9]+' <<< "$out" || fail "$s: no first plan in the table"
  grep -Eq '^3 +dp=' <<< "$out" || fail "$s: --top 3 printed fewer than 3 plans"
  ! grep -Eq '^4 +dp=' <<< "$out" || fail "$s: --top 3 printed more than 3 plans"
  "$plan" "${args[@]}" --top 2 --json > "$work/out.json" || fail "$s --json: exit $?"
  python3 - "$work/out.json" <<'PY' || fail "$s: --json output"
import json, re, sys
r = json.load(open(sys.argv[1]))
assert len(r["plans"]) == 2, r["plans"]
a, b = r["plans"]
assert a["step_seconds"] <= b["step_seconds"]
for p in r["plans"]:
    assert re.fullmatch(r"dp=\d+(,tp=\d+)?(,pp=\d+)?(,fsdp=(full|grad_op|hybrid))?(,micro=\d+)?(,stages=\d+(:\d+)*)?", p["plan"]), p
    assert p["dp"] * p["tp"] * p["pp"] > 0 and len(p["stages"]) == p["pp"] - 1
    assert abs(p["memory_bytes"] - p["model_state_bytes"] - p["gathered_bytes"] - p["activation_bytes"]) <= 1e-6 * p["memory_bytes"]
assert all(i["reason"] for i in r["infeasible"])
PY
done

# Bad input: the message names the file, the field and the value; exit 1.
expect_error() { # name, file args..., then the expected fragments after --
  local name=$1; shift
  local args=()
  while [ "$1" != "--" ]; do args+=("$1"); shift; done
  shift
  set +e
  "$plan" "${args[@]}" > "$work/out" 2> "$work/err"
  local rc=$?
  set -e
  [ $rc -eq 1 ] || fail "$name: exit $rc, expected 1"
  for want in "$@"; do
    grep -qF -- "$want" "$work/err" || fail "$name: '$want' missing from: $(cat "$work/err")"
  done
  echo "ok $name: $(head -c 300 "$work/err")"
}
sed 's/"hosts": 4/"hosts": 4, "host": 2/' "$ex/dgx-a100-4.json" > "$work/unknown.json"
expect_error unknown_key --model "$ex/gpt-1.7b.json" --cluster "$work/unknown.json" \
  --training "$ex/megatron-1.7b.json" -- "cluster file '$work/unknown.json'" "'host'" "unknown key"
sed 's/"peak_tflops": 312/"peak_tflops": -312/' "$ex/dgx-a100-4.json" > "$work/negative.json"
expect_error negative --model "$ex/gpt-1.7b.json" --cluster "$work/negative.json" \
  --training "$ex/megatron-1.7b.json" -- "$work/negative.json" "'peak_tflops'" "-312"
sed 's/"global_batch": 512/"global_batch": "512"/' "$ex/megatron-1.7b.json" > "$work/type.json"
expect_error wrong_type --model "$ex/gpt-1.7b.json" --cluster "$ex/dgx-a100-4.json" \
  --training "$work/type.json" -- "training file '$work/type.json'" "'global_batch'" '"512"'
expect_error missing_file --model "$work/none.json" --cluster "$ex/dgx-a100-4.json" \
  --training "$ex/megatron-1.7b.json" -- "$work/none.json" "cannot be opened"
# The 39 B GPT on 32 devices with a 16 GiB budget: no plan fits.
sed 's/"memory_budget_gib": 76/"memory_budget_gib": 16/' "$ex/megatron-39b.json" > "$work/small.json"
expect_error fits_no_plan --model "$ex/gpt-39b.json" --cluster "$ex/dgx-a100-4.json" \
  --training "$work/small.json" -- "no plan fits"
grep -q "out of memory: needs at least" "$work/out" || fail "fits_no_plan: no out-of-memory reason"
echo "all crown-plan runs passed"
