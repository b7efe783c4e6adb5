#!/usr/bin/env bash
# The full exact-replay matrix of issue 5 (a fast subset runs in CTest: tests/kv/replay_gate_cli_test.cpp).
# Models: stories260K F32 and its Q8_0 / Q4_0 / Q4_K_M / F16 files, synthetic llama / qwen2 / qwen3 at
# Q8_0 / Q6_K / Q4_K (written by `ember model synth`); English and Arabic prompts; each gate run
# also crosses thread counts and SIMD paths (scalar vs the CPU's best, the default) between the three
# processes.
# Usage: scripts/replay-matrix.sh [build/ember] [../shared/models] [OUT]   (exit 1 if any cell fails)
set -uo pipefail
EMBER=${1:-build/ember}
MODELS=${2:-$(dirname "$0")/../../shared/models}
OUT=${3:-build/replay-matrix}
N=${N:-24}
mkdir -p "$OUT/models"
english="Once upon a time, a little fox found a red ball in the park and wanted to share it."
arabic="كان يا ما كان، في قديم الزمان، ولد صغير يحب القراءة والكتابة."
models=()
for f in stories260K stories260K-F16 stories260K-Q8_0 stories260K-Q4_0 stories260K-Q4_K_M; do
  models+=("$MODELS/$f.gguf")
done
for arch in llama qwen2 qwen3; do
  for type in q8_0 q6_k q4_k; do
    m="$OUT/models/$arch-$type.gguf"
    extra=""
    [ "$arch" = qwen2 ] && extra="--qkv-bias --tied"
    [ "$arch" = qwen3 ] && extra="--qk-norm"
    "$EMBER" model synth --arch "$arch" --layers 4 --hidden 256 --heads 8 --kv-heads 2 --ffn 512 --vocab 512 \
      $extra --type "$type" --seed 11 -o "$m" --force >/dev/null || { echo "synth $arch $type failed"; exit 2; }
    models+=("$m")
  done
done
# Each variant names the SIMD paths it forces; a variant whose path this CPU lacks is skipped
# (and said so), so the matrix passes on an AVX2-only CPU with the cells it can run.
all_variants=(
  "--threads 1"
  "--native-threads 1 --export-threads 2 --replay-threads 3"
  "--replay-simd scalar --threads 2"
  "--native-simd scalar --export-simd scalar --threads 1"
  "--native-simd avx2 --export-simd avx512 --replay-simd avx2 --threads 2"
)
cpu_has() {  # cpu_has avx2|avx512|avx512vnni|scalar
  case "$1" in
    scalar) return 0 ;;
    avx2) grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && grep -qw f16c /proc/cpuinfo ;;
    avx512) for f in avx512f avx512bw avx512vl avx512dq; do grep -qw $f /proc/cpuinfo || return 1; done ;;
    avx512vnni) cpu_has avx512 && grep -qw avx512_vnni /proc/cpuinfo ;;
    *) return 1 ;;
  esac
}
variants=()
for v in "${all_variants[@]}"; do
  ok=1
  for path in $(echo "$v" | grep -o -- '-simd [a-z0-9]*' | awk '{print $2}'); do
    cpu_has "$path" || { ok=0; echo "replay matrix: skipping variant '$v': this CPU has no $path path"; }
  done
  [ "$ok" = 1 ] && variants+=("$v")
done
paths=""; for p in scalar avx2 avx512 avx512vnni; do cpu_has $p && paths="$paths $p"; done
echo "replay matrix: SIMD paths on this CPU:$paths; ${#variants[@]} of ${#all_variants[@]} variants run"
pass=0; fail=0; cell=0
printf "%-28s %-8s %-60s %s\n" model prompt variant result
for m in "${models[@]}"; do
  for lang in english arabic; do
    prompt=${!lang}
    for v in "${variants[@]}"; do
      cell=$((cell + 1))
      dir="$OUT/cell-$cell"
      if out=$("$EMBER" kv validate-replay --model "$m" --prompt "$prompt" -n "$N" --out "$dir" --force $v 2>&1); then
        pass=$((pass + 1)); r=pass
      else
        fail=$((fail + 1)); r="FAIL: $(echo "$out" | tail -1)"
      fi
      printf "%-28s %-8s %-60s %s\n" "$(basename "$m")" "$lang" "$v" "$r"
    done
  done
done
echo "replay matrix: $pass passed, $fail failed ($cell cells = ${#models[@]} models x 2 prompts x ${#variants[@]} variants, N=$N, receipts in $OUT/cell-*/receipt.json)"
[ "$fail" -eq 0 ]
