#!/usr/bin/env bash
# The main job on a model that needs no download: synthesize a small model, inspect it.
set -euo pipefail
EMBER=${1:-build/ember}
work=${DEMO_DIR:-build/demo}
mkdir -p "$work"
echo "== ember model synth (a deterministic random-weight qwen2-style model)"
"$EMBER" model synth --arch qwen2 --layers 4 --hidden 128 --heads 4 --kv-heads 2 --ffn 256 \
  --vocab 512 --qkv-bias --tied --type q8_0 --seed 7 -o "$work/demo-qwen2.gguf" --force
echo "== ember model inspect"
"$EMBER" model inspect "$work/demo-qwen2.gguf"
