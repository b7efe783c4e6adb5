#!/usr/bin/env bash
# Seed 001's economics at real geometry (docs/results/README.md, section 4): synthetic
# Qwen2.5-0.5B and Llama-3.2-1B geometry pairs (base + derived with --share-layers), the
# recompute-anchor sweep at prompt lengths 128/512/2048, TTFT as ratios to the target's full
# prefill measured in the same run, and the --fidelity-budget choice.
#
#   scripts/sweep-real-geometry.sh [EMBER] [WORK] [OUT]     (defaults: build/ember build/econ docs/results)
#
# Runs for hours on a 2-vCPU machine (qwen2.5-0.5b: 128 tokens ~9 min, 512 ~20 min, loaded); the models need about 3.7 GB of disk in WORK.
# GEOMETRIES / LENGTHS / THREADS in the environment narrow or change it (e.g. LENGTHS="128").
set -euo pipefail
EMBER=${1:-build/ember}
WORK=${2:-build/econ}
OUT=${3:-docs/results}
THREADS=${THREADS:-2}
GEOMETRIES=${GEOMETRIES:-"qwen2.5-0.5b llama-3.2-1b"}
LENGTHS=${LENGTHS:-"128 512 2048"}
BUDGET=${BUDGET:-"kl<=0.01"}
mkdir -p "$WORK" "$OUT"

# Prompt ids: <|bos|> (272 in the synthetic vocabulary) then N-1 ids drawn uniformly from the
# 272 text tokens (bytes and merges), seeded: distinct prompts of exactly N tokens.
prompt_ids() {  # COUNT N FILE
  python3 - "$1" "$2" "$3" <<'PY'
import random, sys
count, n, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rng = random.Random(1000 * n + count)
with open(path, "w") as f:
    for _ in range(count):
        f.write(",".join(str(t) for t in [272] + [rng.randrange(272) for _ in range(n - 1)]) + "\n")
PY
}

for g in $GEOMETRIES; do
  case $g in
    qwen2.5-0.5b) S=12; ANCHORS=12,15,18,21,24 ;;
    llama-3.2-1b) S=8; ANCHORS=8,10,12,14,16 ;;
    *) echo "unknown geometry $g" >&2; exit 2 ;;
  esac
  base=$WORK/$g-base.gguf derived=$WORK/$g-derived-s$S.gguf
  [ -f "$base" ] || nice -n 5 "$EMBER" model synth --preset "$g" --type q8_0 --seed 1 -o "$base"
  [ -f "$derived" ] || nice -n 5 "$EMBER" model synth --derive-from "$base" --share-layers $S --seed 2 -o "$derived"
  for n in $LENGTHS; do
    # calibration = budget prompts (withheld from the fit) + fit prompts; fewer for the 1B
    # geometry, whose prefill costs about 2.5 times the 0.5B's (COUNTS="CAL EVAL BP" overrides)
    case $g/$n in
      qwen*/128) CAL=16; EVAL=4; BP=4 ;;
      qwen*/512) CAL=6; EVAL=4; BP=2 ;;
      llama*/128) CAL=8; EVAL=4; BP=2 ;;
      llama*/512) CAL=4; EVAL=2; BP=1 ;;
      *) CAL=3; EVAL=2; BP=1 ;;
    esac
    if [ -n "${COUNTS:-}" ]; then read -r CAL EVAL BP <<< "$COUNTS"; fi
    ids=$WORK/prompts-$n.ids
    prompt_ids $((CAL + EVAL)) "$n" "$ids"
    name=$OUT/sweep-$g-synth-s$S-P$n
    rc=0
    nice -n 5 "$EMBER" study sweep --source "$base" --target "$derived" --prompt-ids "$ids" \
      --split $CAL:$EVAL --seed 1 --anchors $ANCHORS --greedy-steps 8 --repeats 1 --threads "$THREADS" \
      --fidelity-budget "$BUDGET" --budget-prompts $BP \
      --json-out "$name.json" --html "$name.html" --force > "$name.txt" || rc=$?
    cat "$name.txt"
    # Exit 1: no boundary meeting the budget beats the full prefill (the report says so).
    [ "$rc" -eq 0 ] || [ "$rc" -eq 1 ] || exit "$rc"
    echo "$name: ${SECONDS}s since the start" >&2
  done
done
