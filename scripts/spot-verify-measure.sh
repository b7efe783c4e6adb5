#!/usr/bin/env bash
# The measurement behind docs/results/spot-verify.md: detection rate and cost of
# `kv verify --spot K` on six corruption classes (bench/spot_verify.cpp), with the witness of
# 16 tokens kv export records and with one of 8, and false alarms on
# clean caches exported on every thread count (1-3) and SIMD path of this CPU, checked by the
# CLI on the default path.
#   scripts/spot-verify-measure.sh [BUILD] [TRIALS] [P]   (default: build 1000 2048)
set -euo pipefail
BUILD=${1:-build}
TRIALS=${2:-1000}
P=${3:-2048}
SHARED=${EMBER_SHARED:-../shared}
MODEL=$SHARED/models/stories260K.gguf
DERIVED=$SHARED/models/stories260K-kjv-top.gguf  # model synth --derive-from stories260K (docs/mapping.md)
PROMPTS=$SHARED/models/prompts-stories-kjv.txt
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) vCPUs"
if [[ -z ${CLI_ONLY:-} ]]; then  # CLI_ONLY=1: only the clean caches through the CLI
  "$BUILD/bench/bench_spot_verify" "$MODEL" "$DERIVED" "$PROMPTS" "$P" "$TRIALS" 1 1
  # A witness of 8 tokens (kv export --witness 8) on the two classes it does not catch whole.
  echo "# witness 8"
  "$BUILD/bench/bench_spot_verify" "$MODEL" "$DERIVED" "$PROMPTS" "$P" "$TRIALS" 1 1 5 flip,swap 8
fi
# False alarms across paths: the file's first 7,000 characters as one prompt (about 2,000
# stories260K tokens; each export prints its count).
python3 - "$PROMPTS" > "$OUT/text.txt" <<'PY'
import sys
print(open(sys.argv[1]).read().replace("\n", " ")[:7000])
PY
alarms=0; checks=0
for simd in scalar avx2 avx512 avx512vnni; do
  EMBER_SIMD=$simd "$BUILD/ember" kv export --model "$MODEL" --prompt-file "$OUT/text.txt" --threads 1 \
    --allow-past-context -o "$OUT/probe" >/dev/null 2>&1 || { echo "# $simd: not on this CPU"; continue; }
  rm -rf "$OUT/probe"
  for threads in 1 2 3; do
    snap="$OUT/clean-$simd-$threads"
    EMBER_SIMD=$simd "$BUILD/ember" kv export --model "$MODEL" --prompt-file "$OUT/text.txt" --threads "$threads" \
      --allow-past-context -o "$snap" >/dev/null 2>&1
    for k in 1 2 4 8; do
      checks=$((checks + 1))
      "$BUILD/ember" kv verify "$snap" --model "$MODEL" --spot "$k" --seed "$threads" --allow-past-context \
        >/dev/null 2>&1 || { alarms=$((alarms + 1)); echo "# false alarm: $simd threads $threads K $k"; }
    done
    echo "# clean $simd threads $threads: $(python3 -c "import json;print(json.load(open('$snap/manifest.json'))['geometry']['positions'])") positions"
  done
done
echo "{\"clean_cli\":{\"checks\":$checks,\"false_alarms\":$alarms}}"
