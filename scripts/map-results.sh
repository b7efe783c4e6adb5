#!/usr/bin/env bash
# Regenerates docs/results/ (the translation studies) with the built ember binary.
#   scripts/map-results.sh [BUILD_DIR]     (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
EMBER="${1:-build}/ember"
MODELS="${EMBER_SHARED:-../shared}/models"
OUT=docs/results
mkdir -p "$OUT"
"$EMBER" study recompute-anchor --json-out "$OUT/recompute-anchor.json" --force | tee "$OUT/recompute-anchor.txt"
"$EMBER" study sweep --source "$MODELS/stories260K.gguf" --target "$MODELS/stories260K-kjv-top.gguf" \
  --prompts "$MODELS/prompts-stories-kjv.txt" --split 320:80 --seed 1 \
  --json-out "$OUT/sweep-stories260K-kjv-top.json" --html "$OUT/sweep-stories260K-kjv-top.html" --force \
  | tee "$OUT/sweep-stories260K-kjv-top.txt"
"$EMBER" study sweep --source "$MODELS/stories260K.gguf" --target "$MODELS/stories260K-Q8_0.gguf" \
  --prompts "$MODELS/prompts-stories-kjv.txt" --split 320:80 --seed 1 --label quantization-boundary \
  --json-out "$OUT/sweep-stories260K-F32-Q8_0.json" --html "$OUT/sweep-stories260K-F32-Q8_0.html" --force \
  | tee "$OUT/sweep-stories260K-F32-Q8_0.txt"
