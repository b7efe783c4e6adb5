#!/usr/bin/env bash
# Builds every libFuzzer target in fuzz/ with clang (Debian 12's clang 14; README "Fuzzing") and
# runs each briefly over its seed corpus, so the fuzz build cannot rot unnoticed (issue 35: it
# had stopped compiling). CI runs it (.ci/run); the long runs of docs/reliability.md "Fuzzing"
# are the same binaries with -max_total_time=1800.
#
#   scripts/fuzz-smoke.sh [SECONDS_PER_TARGET]    (default 10; JOBS sets the build's -j and how
#                                                  many targets run at once, one core each)
#
# Exit status: non-zero when a target does not build or a run finds a crash, a leak, a timeout
# or an out-of-memory (libFuzzer's own exit status; the reproducer is left in build-fuzz/findings).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
jobs=${JOBS:-$(nproc)}
build=build-fuzz

# Each target and its seeds (README "Fuzzing"); a target without a row here fails the script.
declare -A corpus=(
  [gguf_fuzz]=fuzz/corpus/gguf
  [tokenizer_fuzz]=fuzz/corpus/tokenizer
  [kv_manifest_fuzz]=fuzz/corpus/manifest
  [kvc1_fuzz]=fuzz/corpus/kvc1
  [kv_llamacpp_fuzz]=fuzz/corpus/llamacpp
  [util_safetensors_fuzz]=fuzz/corpus/safetensors
  [map_mapper_fuzz]=fuzz/corpus/mapper
  [map_calibration_fuzz]=fuzz/corpus/calibration
  [contract_fuzz]=schemas/examples
  [serve_api_fuzz]=fuzz/corpus/serve
)
targets=()
for src in fuzz/*_fuzz.cpp; do
  t=$(basename "$src" .cpp)
  [ -n "${corpus[$t]:-}" ] || { echo "fuzz-smoke: $src has no seed corpus in scripts/fuzz-smoke.sh" >&2; exit 1; }
  targets+=("$t")
done

start=$(date +%s)
CXX=clang++ CC=clang cmake -S . -B "$build" -G Ninja -DEMBER_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
# Only the fuzz targets (and the libraries they link): not the CLI, which no target runs.
cmake --build "$build" -j "$jobs" --target "${targets[@]}"
echo "fuzz-smoke: built ${#targets[@]} targets in $(( $(date +%s) - start )) s"

findings="$build/findings"
rm -rf "$findings" "$build"/*.result && mkdir -p "$findings"
# One target: a scratch corpus first (libFuzzer writes new inputs there), the seeds read-only
# after it. Its summary line goes to $build/$t.result, so parallel runs do not interleave.
run_target() {
  local t=$1 work="$build/corpus-$1" dict=()
  rm -rf "$work" && mkdir -p "$work"
  [ -f "fuzz/${t%_fuzz}.dict" ] && dict=(-dict="fuzz/${t%_fuzz}.dict")
  if "$build/fuzz/$t" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
      -artifact_prefix="$findings/$t-" "${dict[@]}" "$work" "${corpus[$t]}" >"$build/$t.log" 2>&1; then
    local runs
    runs=$(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$build/$t.log" | grep -o '[0-9]*$')
    echo "fuzz-smoke: $t: $runs runs in ${secs} s, no finding" >"$build/$t.result"
  else
    {
      tail -40 "$build/$t.log"
      echo "fuzz-smoke: $t failed (log $build/$t.log, reproducer in $findings)"
    } >"$build/$t.result"
    return 1
  fi
}
# $jobs targets at a time (each is one process on one core; CI's 2 vCPUs run two at once).
failed=0
running=0
for t in "${targets[@]}"; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n || failed=1
    running=$((running - 1))
  fi
  run_target "$t" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || failed=1
  running=$((running - 1))
done
for t in "${targets[@]}"; do
  if grep -q "failed (log" "$build/$t.result"; then
    cat "$build/$t.result" >&2
  else
    cat "$build/$t.result"
  fi
done
[ "$failed" = 0 ] || exit 1
echo "fuzz-smoke: ${#targets[@]} targets built and run in $(( $(date +%s) - start )) s"
