#!/usr/bin/env bash
# Hostile inputs against the resource limits (issue 12, defects 3-5), end to end against the
# built binary: thread counts, huge -n, huge snapshot positions. Every run is bounded by
# `timeout`; a limit that does not hold (accepted, hung, or memory out of proportion) fails.
# Usage: scripts/hostile-limits.sh [build/ember] [../shared/models] [OUT]   (exit 1 on any broken promise)
set -uo pipefail
EMBER=${1:-build/ember}
MODELS=${2:-$(dirname "$0")/../../shared/models}
OUT=${3:-build/hostile-limits}
STORIES="$MODELS/stories260K.gguf"   # llama.context_length = 128
rm -rf "$OUT" && mkdir -p "$OUT"
failures=0
pass() { echo "ok    $1"; }
broken() { echo "FAIL  $1"; failures=$((failures + 1)); }

# expect NAME RC SECONDS PATTERN -- CMD...: CMD exits RC within SECONDS and prints PATTERN.
expect() {
  local name=$1 want=$2 secs=$3 pattern=$4
  shift 5
  local log="$OUT/$name.log"
  timeout "$secs" "$@" >"$log" 2>&1
  local rc=$?
  if [ "$rc" -eq 124 ]; then broken "$name: still running after ${secs} s"; return; fi
  if [ "$rc" -ne "$want" ]; then broken "$name: exit $rc, expected $want ($(tail -1 "$log"))"; return; fi
  if [ -n "$pattern" ] && ! grep -qF -- "$pattern" "$log"; then broken "$name: no '$pattern' in output"; return; fi
  pass "$name"
}

# bounded_rss NAME SECONDS MAX_KIB CMD...: CMD is still working after SECONDS (stopped by
# timeout, not refused) and its peak RSS stayed below MAX_KIB.
bounded_rss() {
  local name=$1 secs=$2 max=$3
  shift 3
  /usr/bin/time -f '%M' -o "$OUT/$name.rss" timeout "$secs" "$@" >"$OUT/$name.log" 2>&1
  local rc=$? rss
  rss=$(tail -1 "$OUT/$name.rss")
  if [ "$rc" -ne 124 ]; then broken "$name: exit $rc before ${secs} s ($(tail -1 "$OUT/$name.log"))"; return; fi
  if [ -z "$rss" ] || [ "$rss" -ge "$max" ]; then broken "$name: peak RSS '${rss}' KiB (expected < $max)"; return; fi
  pass "$name: peak RSS ${rss} KiB after ${secs} s"
}

run=("$EMBER" run --model "$STORIES")

# --- thread counts (defect 3) ---
expect threads-negative 2 10 "--threads: thread count: expected 0 (the cores present) or a positive count, found -1" -- \
  "${run[@]}" --threads -1 -n 2 --prompt-ids 1
expect threads-1000-clamped 0 30 "cores present; using" -- \
  "${run[@]}" --threads 1000 -n 8 --prompt 'Once upon a time'
expect threads-huge 0 30 "cores present; using" -- \
  "${run[@]}" --threads 2147483647 -n 2 --prompt-ids 1
expect threads-kv-compare-negative 2 10 "found -5" -- \
  "$EMBER" kv compare --threads -5 "$OUT" "$OUT"
expect threads-gate-negative 2 10 "--replay-threads: thread count" -- \
  "$EMBER" kv validate-replay --model "$STORIES" --prompt hi -n 2 -o "$OUT/gate" --replay-threads -1

# --- huge -n and prompts past the context (defects 4, 5) ---
expect n-int-max 2 10 "-n: steps: expected at most 128" -- "${run[@]}" -n 2147483647 --prompt-ids 1
expect n-int-max-past-context 2 10 "-n: steps: expected at most 16777216" -- \
  "${run[@]}" --allow-past-context -n 2147483647 --prompt-ids 1
expect n-16777000 2 10 "-n: steps: expected at most 128" -- "${run[@]}" -n 16777000 --prompt-ids 1
expect n-negative 2 10 "-n: steps: expected >= 1" -- "${run[@]}" -n -3 --prompt-ids 1
ids=1; for _ in $(seq 1 200); do ids="$ids,13"; done
expect prompt-past-context 2 10 "--prompt-ids: tokens: expected at most 128 positions" -- \
  "${run[@]}" -n 1 --prompt-ids "$ids"
# Allowed past the context, the cache grows as it fills: 5 s of a 16777000-step run stays small
# (it was a ~10.7 GB zero-fill up front).
bounded_rss n-16777000-allowed 5 524288 "${run[@]}" --quiet --ignore-eos --allow-past-context -n 16777000 --prompt-ids 1

# --- huge snapshot positions (defect 4) ---
"$EMBER" kv export --model "$STORIES" --prompt 'Once upon a time' -o "$OUT/snap" >"$OUT/export.log" 2>&1 \
  || broken "export for the position tests failed"
# The same manifest claiming 4,194,304 positions (ids, counts, hashes and sizes consistent);
# the payloads are not touched: the claim is refused from the manifest alone.
mkdir -p "$OUT/huge"
python3 - "$OUT/snap/manifest.json" "$OUT/huge" <<'PY'
import hashlib, json, struct, sys
src, out = sys.argv[1], sys.argv[2]
m = json.load(open(src))
P = 4194304
toks = [13] * P
m["geometry"]["positions"] = P
m["prefix"] = {"count": P, "sha256": hashlib.sha256(struct.pack("<%di" % P, *toks)).hexdigest(), "tokens": toks}
m["resume"]["position"] = P
g = m["geometry"]
for k in ("keys", "values"):
    m["payload"][k]["bytes"] = 2 * g["layers"] * g["kv_heads"] * P * g["head_dim"]
# Version 1 (no proof): a version 2 proof of 2^22 positions (a block hash per 16) would not fit
# the manifest limits, and version 1 is still read.
m["version"] = 1
m.pop("proof", None)
# Re-sealed (docs/reliability.md), so that only the position limit can refuse it.
import hashlib
body = {k: v for k, v in m.items() if k not in ("seal", "signature")}
m["seal"] = hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()).hexdigest()
open(out + "/manifest.json", "w").write(json.dumps(m, indent=2) + "\n")
for f in ("keys.f16le", "values.f16le"):
    open(out + "/" + f, "wb").write(b"\0" * 16)
PY
expect replay-4M-positions 2 20 "geometry.positions + the resume token: expected at most 128 positions" -- \
  "$EMBER" kv replay --model "$STORIES" --snapshot "$OUT/huge" -n 2
expect replay-steps-past-context 2 10 "-n: steps: expected at most" -- \
  "$EMBER" kv replay --model "$STORIES" --snapshot "$OUT/snap" -n 1000
expect replay-n-int-max 2 10 "-n: steps: expected at most" -- \
  "$EMBER" kv replay --model "$STORIES" --snapshot "$OUT/snap" --allow-past-context -n 2147483647
expect export-past-context 2 10 "prompt: tokens: expected at most 128 positions" -- \
  "$EMBER" kv export --model "$STORIES" --prompt-ids "$ids" -o "$OUT/past"

echo "hostile-limits: $failures broken promise(s)"
[ "$failures" -eq 0 ]
