#!/usr/bin/env bash
# The full exact-replay matrix of seed 000 / issue 5 as one `ember kv matrix` run (docs/matrix.md;
# a small matrix runs in CTest: tests/analysis/matrix_cli_test.cpp). The script only writes the
# model list: stories260K F32 and its F16 / Q8_0 / Q4_0 / Q4_K_M files, and synthetic llama / qwen2
# / qwen3 at Q8_0 / Q6_K / Q4_K (written by `ember model synth`); the prompts (English, Arabic)
# are scripts/replay-matrix-prompts.jsonl; the variants are kv matrix's default five (thread
# counts and SIMD paths crossed between native, export and replay; a variant forcing a path
# this CPU lacks is skipped, and the table says so).
# Usage: scripts/replay-matrix.sh [build/ember] [../shared/models] [OUT] [kv matrix flags...]
# Writes OUT/matrix.txt, OUT/matrix.json, OUT/matrix.html; exit 1 if any cell fails.
set -euo pipefail
EMBER=${1:-build/ember}
MODELS=${2:-$(dirname "$0")/../../shared/models}
OUT=${3:-build/replay-matrix}
shift $(( $# < 3 ? $# : 3 ))
N=${N:-24}
mkdir -p "$OUT/models"
list="$OUT/models.txt"
: > "$list"
for f in stories260K stories260K-F16 stories260K-Q8_0 stories260K-Q4_0 stories260K-Q4_K_M; do
  realpath "$MODELS/$f.gguf" >> "$list"
done
for arch in llama qwen2 qwen3; do
  for type in q8_0 q6_k q4_k; do
    m="$OUT/models/$arch-$type.gguf"
    extra=""
    [ "$arch" = qwen2 ] && extra="--qkv-bias --tied"
    [ "$arch" = qwen3 ] && extra="--qk-norm"
    "$EMBER" model synth --arch "$arch" --layers 4 --hidden 256 --heads 8 --kv-heads 2 --ffn 512 --vocab 512 \
      $extra --type "$type" --seed 11 -o "$m" --force >/dev/null
    realpath "$m" >> "$list"
  done
done
rc=0
"$EMBER" kv matrix --models "$list" --prompts "$(dirname "$0")/replay-matrix-prompts.jsonl" -n "$N" \
  -o "$OUT/cells" --force --json-out "$OUT/matrix.json" --html "$OUT/matrix.html" "$@" > "$OUT/matrix.txt" || rc=$?
cat "$OUT/matrix.txt"
exit $rc
