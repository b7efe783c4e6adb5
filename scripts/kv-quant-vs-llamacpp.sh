#!/bin/bash
# The ember side of docs/results/kv-quant-vs-llamacpp.md: `study kv-quant` in-loop (and the
# prefix-only mode, for contrast) on llama-perplexity's own chunks (-c 256, first 8 chunks of
# the shared text; stories260K -c 128, its context), per model and rotation, one JSON each under OUT. The llama.cpp side is
# run by hand (the commands are in that page); this script never builds or calls llama.cpp.
#
#   scripts/kv-quant-vs-llamacpp.sh [EMBER] [OUT]     (from the repository root)
set -euo pipefail
EMBER=${1:-build/ember}
OUT=${2:-/tmp/kvq-ember}
TEXT=../shared/models/prompts-stories-kjv.txt
mkdir -p "$OUT"
for m in stories260K synthetic/llama-gqa-s5005.F32 synthetic/qwen2-bias-s5006.F32; do
  n=$(basename $m)
  c=256
  [ $n = stories260K ] && c=128   # its context length (llama.cpp refuses its quantized caches anyway)
  rots=llamacpp
  [ $n = qwen2-bias-s5006.F32 ] && rots="llamacpp none"   # the only one whose head_dim (64) llama.cpp rotates
  for rot in $rots; do
    for mode in in-loop prefix; do
      /usr/bin/time -f "$n $rot $mode: %e s" "$EMBER" study kv-quant --model ../shared/models/$m.gguf --prompts $TEXT \
        --chunks $c --limit 8 --mode $mode --rotation $rot --groups none --types q8_0,q5_1,q5_0,iq4_nl,q4_1,q4_0 \
        --parts k,v,kv --threads 2 --force --json-out "$OUT/$n.$rot.$mode.json" > "$OUT/$n.$rot.$mode.txt"
    done
  done
done
