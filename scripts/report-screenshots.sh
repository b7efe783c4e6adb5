#!/usr/bin/env bash
# Renders every HTML report under docs/results/ and a fresh `kv compare` report to PNG with
# headless Chromium, and fails if a PNG is missing or blank (fewer than a handful of distinct
# colours). Look at the PNGs yourself: this checks that something was drawn, not that it is
# good. Not part of CI (Chromium is not a CI dependency): docs/compare.md, "HTML report".
#
# Usage: scripts/report-screenshots.sh [OUT_DIR [PAGE.html ...]]
#   OUT_DIR defaults to /tmp/ember-report-png, the pages to docs/results/*.html; EMBER=path
#   chooses the binary (default build/ember).
# Needs: Debian's chromium (apt-get install -y chromium), python3.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-/tmp/ember-report-png}
ember=${EMBER:-$root/build/ember}
shift || true
chrome=$(command -v chromium || command -v chromium-browser || true)
[ -n "$chrome" ] || { echo "report-screenshots: chromium not found (apt-get install -y chromium)" >&2; exit 2; }
[ -x "$ember" ] || { echo "report-screenshots: $ember not built (cmake --build build --target ember)" >&2; exit 2; }
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A fresh compare report: a small synthetic model, a snapshot and its zeroed (layer 1, head 0)
# perturbation, compared with diagnostics.
"$ember" model synth --arch qwen2 --layers 6 --hidden 128 --heads 4 --kv-heads 2 --ffn 256 \
  --vocab 512 --qkv-bias --tied --type q8_0 --seed 7 -o "$work/m.gguf" >/dev/null
"$ember" kv export --model "$work/m.gguf" --prompt 'The quick brown fox jumps over the lazy dog' \
  --output "$work/snap" >/dev/null
"$ember" kv perturb --snapshot "$work/snap" --layer 1 --head 0 --part kv --zero \
  --receipt "$work/p.json" >/dev/null
"$ember" kv compare "$work/snap" "$work/snap" --perturb "$work/p.json" --model "$work/m.gguf" \
  --steps 12 --html "$work/compare.html" >/dev/null || true  # exit 1 = differences found
[ -s "$work/compare.html" ] || { echo "report-screenshots: kv compare wrote no report" >&2; exit 1; }

if [ $# -gt 0 ]; then pages=("$work/compare.html" "$@"); else pages=("$work/compare.html" "$root"/docs/results/*.html); fi
fail=0
for page in "${pages[@]}"; do
  name=$(basename "$page" .html)
  png="$out/$name.png"
  rm -f "$png"
  timeout 60 "$chrome" --headless --no-sandbox --disable-gpu --disable-background-networking \
    --disable-component-update --disable-sync --no-first-run --hide-scrollbars \
    --user-data-dir="$(mktemp -d -p "$work")" --window-size=1280,2400 \
    --screenshot="$png" "file://$(realpath "$page")" >/dev/null 2>&1 || true
  if ! python3 "$root/scripts/png-colours.py" "$png" 8; then fail=1; fi
done
echo "report-screenshots: PNGs in $out"
exit $fail
