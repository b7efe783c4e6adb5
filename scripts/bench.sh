#!/usr/bin/env bash
# Runs every benchmark built under BUILD/bench (bench_*). Each prints ratios against a limit it
# measured in the same run; absolute times alone mean little on a shared machine.
# Fails when a benchmark fails or when none was found: a Release build with EMBER_BENCH=OFF, or
# a BUILD that is not a build directory, would otherwise pass having measured nothing.
set -euo pipefail
BUILD=${1:-build}
ran=0
for b in "$BUILD"/bench/bench_*; do
  [ -f "$b" ] && [ -x "$b" ] || continue
  echo "== $(basename "$b")"
  "$b"
  ran=$((ran + 1))
done
if [ "$ran" -eq 0 ]; then
  echo "bench.sh: expected benchmarks in $BUILD/bench/bench_*, found none; build with -DEMBER_BENCH=ON" >&2
  exit 1
fi
echo "== $ran benchmarks ran"
