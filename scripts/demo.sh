#!/usr/bin/env bash
# The main job: generate readable text with a real trained model (stories260K, from ../shared
# beside the checkout), then, on a synthetic model that needs no download, export its KV
# state, verify it, replay it bit for bit, refuse corrupted copies, share it through a store,
# and serve it. The last line says what was shown.
set -euo pipefail
EMBER=${1:-build/ember}
work=${DEMO_DIR:-build/demo}
mkdir -p "$work"
shown=()
real="$(dirname "$0")/../../shared/models/stories260K.gguf"
if [ -f "$real" ]; then
  echo "== ember run: a real trained model (stories260K, 260K parameters) continues a story"
  "$EMBER" run -m "$real" -p "Once upon a time, there was a little girl named Lily." -n 40 -t 2
  echo
fi
echo "== The rest uses a synthetic model: random weights, so its text is noise (<|reserved_N|>"
echo "   tokens). What it shows is that the cache's bits mean what they meant."
echo "== ember model synth (a deterministic random-weight qwen2-style model)"
"$EMBER" model synth --arch qwen2 --layers 4 --hidden 128 --heads 4 --kv-heads 2 --ffn 256 \
  --vocab 512 --qkv-bias --tied --type q8_0 --seed 7 -o "$work/demo-qwen2.gguf" --force
echo "== ember model inspect"
"$EMBER" model inspect "$work/demo-qwen2.gguf"

# --- KV snapshots (docs/formats/kv-snapshot-v1.md): export, verify, replay, the exact gate ---
model="$work/demo-qwen2.gguf"
prompt="The cache is a first-class artifact: export it, verify it, replay it."
echo "== ember kv export (prefill the prompt; the resume token is stored, not cached)"
"$EMBER" kv export --model "$model" --arch qwen2 --prompt "$prompt" --output "$work/snapshot" --force
echo "== ember kv verify (format, sizes, hashes, consistency; no model needed)"
"$EMBER" kv verify "$work/snapshot"
echo "== ember kv replay (strict import, then continue from the resume token)"
"$EMBER" kv replay "$work/snapshot" --model "$model" --arch qwen2 -n 16 --ignore-eos
echo "== a corrupted snapshot is refused (one flipped payload bit)"
cp -r "$work/snapshot" "$work/snapshot-corrupt"
printf '\x01' | dd of="$work/snapshot-corrupt/keys.f16le" bs=1 seek=100 conv=notrunc status=none
if "$EMBER" kv verify "$work/snapshot-corrupt"; then echo "demo: corruption was not caught" >&2; exit 1; fi
rm -rf "$work/snapshot-corrupt"
shown+=("a flipped payload bit refused")
echo "== ember kv validate-replay (three processes; native == concat(boundary, replay), f32 bit for bit)"
"$EMBER" kv validate-replay --model "$model" --arch qwen2 --prompt "$prompt" -n 24 -o "$work/gate" --force \
  --export-threads 2 --replay-threads 1 --replay-simd scalar
shown+=("export -> replay equal to the uninterrupted run, f32 bit for bit, across processes, threads and SIMD paths")

# --- Measurement (docs/compare.md): a receipted perturbation, localized by kv compare ---
echo "== ember kv perturb (a typed receipt: zero K and V of layer 0, head 0; never a cache)"
"$EMBER" kv perturb --snapshot "$work/snapshot" --layer 0 --head 0 --part kv --zero \
  --receipt "$work/zero-l0h0.json" --force
echo "== ember kv compare with the model: where does the edit show, and does it matter?"
# Exit status 1 means a threshold failed, which is the point here: the report localizes it.
set +e
"$EMBER" kv compare "$work/snapshot" "$work/snapshot" --perturb "$work/zero-l0h0.json" \
  --model "$model" --steps 4 --min-cosine 0.999 --html "$work/compare.html" --force
rc=$?
set -e
if [ "$rc" -ne 1 ]; then echo "demo: expected the perturbed compare to fail its threshold (exit 1), got $rc" >&2; exit 1; fi
echo "demo: the HTML report is $work/compare.html"
shown+=("a zeroed head localized by kv compare")

# --- The shared store (docs/store.md) on dir: (no server; the README shows the Redis URI) ---
store="dir:$work/store"
rm -rf "$work/store"
echo "== ember store put (content-addressed chunks, the sealed entry published last)"
"$EMBER" store put "$store" "$work/snapshot" --name demo --chunk-bytes 4096
longer="$prompt Then share it."
echo "== ember kv replay --store (restore the longest stored prefix, compute the rest)"
"$EMBER" kv replay --model "$model" --store "$store" --prompt "$longer" -n 8 --ignore-eos \
  --logits-out "$work/store-hit.f32" --force
"$EMBER" run --model "$model" --prompt "$longer" -n 8 --ignore-eos --quiet --dump-logits "$work/cold.f32" --force
cmp "$work/store-hit.f32" "$work/cold.f32"
echo "demo: the store hit's logits equal the cold run's, f32 bit for bit"
shown+=("a store prefix hit equal to a cold prefill, bit for bit")
echo "== a corrupted chunk is refused, named (and recomputed only when asked)"
chunk=$(find "$work/store" -path '*chunk*' -type f | sort | head -1)
printf '\x01' | dd of="$chunk" bs=1 seek=100 conv=notrunc status=none
if "$EMBER" store get "$store" "$("$EMBER" store ls "$store" --json | sed -n 's/.*"seal": "\(.*\)".*/\1/p')" \
    -o "$work/store-get" --force; then
  echo "demo: the corrupt chunk was not caught" >&2; exit 1
fi
"$EMBER" kv replay --model "$model" --store "$store" --prompt "$longer" -n 8 --ignore-eos --on-bad-state recompute
shown+=("a corrupt store chunk refused by name")

# --- The same on the real trained model, when ../shared sits beside the checkout ---
if [ -f "$real" ]; then
  echo "== a real model (stories260K): export 'Once upon a time', replay 24 tokens, gate"
  "$EMBER" kv export --model "$real" --prompt "Once upon a time" --output "$work/stories" --force
  "$EMBER" kv replay "$work/stories" --model "$real" -n 24
  "$EMBER" kv validate-replay --model "$real" --prompt "Once upon a time" -n 24 -o "$work/stories-gate" --force
  shown+=("the same on stories260K")
fi

# --- The server (docs/serve.md): a request, the same request again from the prefix cache with
# the same bits, and a clean stop ---
serve_model="$model"
[ -f "$real" ] && serve_model="$real"
echo "== ember serve (a free loopback port; the line it prints names it)"
"$EMBER" serve -m "$serve_model" --port 0 --parallel 2 2> "$work/serve.log" &
serve_pid=$!
# A step below that fails must not leave the server running (a test runs this script).
trap 'kill "$serve_pid" 2>/dev/null || true' EXIT
port=""
for _ in $(seq 1 200); do
  port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$work/serve.log")
  [ -n "$port" ] && break
  kill -0 "$serve_pid" 2>/dev/null || { cat "$work/serve.log" >&2; exit 1; }
  sleep 0.05
done
[ -n "$port" ] || { echo "demo: ember serve did not start" >&2; exit 1; }
body='{"model":"'"$(basename "$serve_model")"'","prompt":"Once upon a time, there was a little girl named Lily. She loved to","max_tokens":24,"temperature":0.8,"seed":7,"logprobs":1}'
for i in 1 2; do
  curl -s --max-time 60 "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' -d "$body" > "$work/serve-$i.json"
done
python3 - "$work/serve-1.json" "$work/serve-2.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
print("request 1:", repr(a["choices"][0]["text"]), "| prefix:", a["ember"]["prefix"])
print("request 2:", repr(b["choices"][0]["text"]), "| prefix:", b["ember"]["prefix"])
same = a["choices"][0]["text"] == b["choices"][0]["text"] and a["choices"][0]["logprobs"] == b["choices"][0]["logprobs"]
if not same or b["ember"]["prefix"]["tier"] != "ram":
    sys.exit("demo: the repeated request was not a RAM hit with the same text and logprobs")
print("demo: the repeated request restored", b["usage"]["prompt_tokens_details"]["cached_tokens"],
      "prompt tokens from RAM and returned the same text and logprobs, bit for bit")
PY
kill -TERM "$serve_pid"
wait "$serve_pid"
trap - EXIT
echo "demo: ember serve stopped cleanly on SIGTERM"
shown+=("a served request repeated from the RAM prefix cache with the same text and logprobs")

summary=$(printf '%s; ' "${shown[@]}")
echo
echo "demo: OK (${#shown[@]} checks): ${summary%; }."
