#!/usr/bin/env bash
# Runs every benchmark built under BUILD (bench_*). Each prints ratios against a limit it
# measured in the same run; absolute times alone mean little on a shared machine.
set -euo pipefail
BUILD=${1:-build}
for b in "$BUILD"/bench_*; do
  [ -x "$b" ] || continue
  echo "== $(basename "$b")"
  "$b"
done
