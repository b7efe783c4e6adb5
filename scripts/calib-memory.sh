#!/usr/bin/env bash
# Peak memory of calibration + fit at real geometry (issue 18, "bounded memory"): a synthetic
# Qwen2.5-0.5B-geometry pair (ember model synth, seeds 1 and 2, Q8_0), 64 prompts of 128 random
# token ids, `map collect` (48 calibration + 16 evaluation prompts, residual statistics kept)
# then `map fit --kind affine --anchor-identity --residual-maps`, each under /usr/bin/time -v.
# Prints one line per step: wall time, CPU seconds (user + system) and peak RSS (ru_maxrss).
# Not a CTest test: minutes (docs/mapping.md, "Memory, measured", has the figures).
#
#   scripts/calib-memory.sh [build/ember] [work-dir] [threads]
set -euo pipefail
EMBER=${1:-build/ember}
WORK=${2:-$(mktemp -d)}
THREADS=${3:-2}
PRESET=${PRESET:-qwen2.5-0.5b}
PROMPTS=${PROMPTS:-64}
TOKENS=${TOKENS:-128}
mkdir -p "$WORK"
for seed in 1 2; do
  [ -f "$WORK/m$seed.gguf" ] || "$EMBER" model synth --preset "$PRESET" --type q8_0 --seed "$seed" -o "$WORK/m$seed.gguf" >/dev/null
done
# Random ids in [3, 255]: the synthetic byte-level tokenizer's byte tokens, no BOS.
python3 - "$WORK/prompts.ids" "$PROMPTS" "$TOKENS" <<'PY'
import random, sys
random.seed(18)
with open(sys.argv[1], "w") as f:
    for _ in range(int(sys.argv[2])):
        f.write(",".join(str(random.randint(3, 255)) for _ in range(int(sys.argv[3]))) + "\n")
PY
measure() {  # label, command...
  local label=$1; shift
  /usr/bin/time -v "$@" >"$WORK/$label.out" 2>"$WORK/$label.time"
  local rss wall cpu
  rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$WORK/$label.time")
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$WORK/$label.time")
  cpu=$(awk -F': ' '/User time|System time/ {s += $2} END {printf "%.0f", s}' "$WORK/$label.time")
  printf '%-8s wall %s  cpu %s s  peak RSS %.0f MiB\n' "$label" "$wall" "$cpu" "$(echo "$rss / 1024" | bc -l)"
}
N_EVAL=$((PROMPTS / 4))
measure collect "$EMBER" map collect --source "$WORK/m1.gguf" --target "$WORK/m2.gguf" --prompt-ids "$WORK/prompts.ids" \
  --split "$((PROMPTS - N_EVAL)):$N_EVAL" --seed 1 --threads "$THREADS" --output "$WORK/calib" --force
measure fit "$EMBER" map fit --calibration "$WORK/calib" --kind affine --lambda 1 --anchor-identity --residual-maps \
  --relation cross-model --threads "$THREADS" --output "$WORK/mapper" --force
printf 'calibration set %s MiB, mapper %s MiB, %s (%s), %s threads\n' \
  "$(du -sm "$WORK/calib" | cut -f1)" "$(du -sm "$WORK/mapper" | cut -f1)" "$PRESET" \
  "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')" "$THREADS"
