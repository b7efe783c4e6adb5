// Which AVX2 instructions of the int8 kernels compete for the same execution pipes: each test
// runs 6 vpmaddubsw and 6 (or 12) instructions of one other kind per iteration, all
// independent (fixed sources, distinct destinations), and reports cycles per iteration. 6
// vpmaddubsw alone take 3 cycles on a core with two pipes for it; a partner that shares those
// pipes lifts the pair to 6, one that runs elsewhere leaves it near 3. Then six steps of the
// kernels themselves (32 MACs of one row and one token each, loads left out): the sign trick
// (vpsignb + vpmaddubsw + vpmaddwd + vcvtdq2ps + vshufps + vfmadd231ps) and the int16 panel
// (2 vpmaddwd + vpaddd + the same float part). docs/engine.md uses it to say what bounds the
// AVX2 32-block kernels (kernels_avx2.cpp).
//
// Usage: bench_ports. Cycles come from the time of a chain of dependent 64-bit adds (1 cycle
// each on every x86 core of the last decade), so they need no clock or performance counter.
// Single-threaded, best of 5; AVX2 only (exits 0 with a line saying so on a CPU without it).
#include <chrono>
#include <cstdint>
#include <cstdio>

#include "perf/bench_report.h"
#include "util/simd.h"

namespace {

using Loop = void (*)(int64_t);

// The loop body repeated n times; ymm14 and ymm15 hold the fixed sources.
#define EMBER_PORT_LOOP(name, body)                                                               \
  __attribute__((target("avx2,fma"), noinline)) void name(int64_t n) {                              \
    __asm__ volatile("vpcmpeqb %%ymm15, %%ymm15, %%ymm15\n\tvpabsb %%ymm15, %%ymm14\n\t"            \
                     "vxorps %%ymm6, %%ymm6, %%ymm6\n\tvxorps %%ymm7, %%ymm7, %%ymm7\n\t"            \
                     "vxorps %%ymm8, %%ymm8, %%ymm8\n\tvxorps %%ymm9, %%ymm9, %%ymm9\n\t"            \
                     "vxorps %%ymm10, %%ymm10, %%ymm10\n\tvxorps %%ymm11, %%ymm11, %%ymm11\n\t"       \
                     "1:\n\t" body "dec %0\n\tjnz 1b\n\t"                                           \
                     : "+r"(n)                                                                      \
                     :                                                                              \
                     : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",      \
                       "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "cc");          \
  }
#define X6(op) op(0) op(1) op(2) op(3) op(4) op(5)
#define Y6(op) op(6) op(7) op(8) op(9) op(10) op(11)
#define MADDUBS(i) "vpmaddubsw %%ymm14, %%ymm15, %%ymm" #i "\n\t"
#define MADD(i) "vpmaddwd %%ymm14, %%ymm15, %%ymm" #i "\n\t"
#define SIGN(i) "vpsignb %%ymm14, %%ymm15, %%ymm" #i "\n\t"
#define FMA(i) "vfmadd231ps %%ymm14, %%ymm15, %%ymm" #i "\n\t"  // ymm6-11: 1 per chain per iteration
#define CVT(i) "vcvtdq2ps %%ymm14, %%ymm" #i "\n\t"
#define XORSUB(i) "vpxor %%ymm14, %%ymm15, %%ymm" #i "\n\tvpsubb %%ymm14, %%ymm15, %%ymm" #i "\n\t"
#define SHUF(i) "vshufps $0x55, %%ymm14, %%ymm14, %%ymm" #i "\n\t"
#define PADDD(i) "vpaddd %%ymm14, %%ymm15, %%ymm" #i "\n\t"
EMBER_PORT_LOOP(maddubs_x12, X6(MADDUBS) Y6(MADDUBS))
EMBER_PORT_LOOP(maddubs_alone, X6(MADDUBS))
EMBER_PORT_LOOP(with_madd, X6(MADDUBS) Y6(MADD))
EMBER_PORT_LOOP(with_sign, X6(MADDUBS) Y6(SIGN))
EMBER_PORT_LOOP(with_fma, X6(MADDUBS) Y6(FMA))
EMBER_PORT_LOOP(with_cvt, X6(MADDUBS) Y6(CVT))
EMBER_PORT_LOOP(with_xorsub, X6(MADDUBS) Y6(XORSUB))
EMBER_PORT_LOOP(with_shufps, X6(MADDUBS) Y6(SHUF))
// Six (row, token) steps of 32 MACs of the AVX2 32-block kernels (kernels_avx2.cpp), all their
// vector instructions but the loads: the sign trick of the Q32K tile, and the int16 panel.
EMBER_PORT_LOOP(steps_sign_trick, X6(SIGN) X6(MADDUBS) X6(MADD) X6(CVT) X6(SHUF) Y6(FMA))
EMBER_PORT_LOOP(steps_int16, X6(MADD) X6(MADD) X6(PADDD) X6(CVT) X6(SHUF) Y6(FMA))
#undef X6
#undef Y6

// 12 dependent adds per iteration: 12 cycles.
__attribute__((noinline)) void add_chain(int64_t n) {
  int64_t x = 1;
  __asm__ volatile(
      "1:\n\t"
      "add %1, %1\n\tadd %1, %1\n\tadd %1, %1\n\tadd %1, %1\n\tadd %1, %1\n\tadd %1, %1\n\t"
      "add %1, %1\n\tadd %1, %1\n\tadd %1, %1\n\tadd %1, %1\n\tadd %1, %1\n\tadd %1, %1\n\t"
      "dec %0\n\tjnz 1b\n\t"
      : "+r"(n), "+r"(x)
      :
      : "cc");
}

double best_seconds(Loop loop, int64_t n) {
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    loop(n);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s < best) best = s;
  }
  return best;
}

}  // namespace

int main() {
  if (!ember::simd_supported(ember::SimdLevel::avx2)) {
    std::printf("bench_ports: this CPU has no AVX2; nothing measured\n");
    return 0;
  }
  const int64_t n = 20'000'000;
  const double cycle = best_seconds(add_chain, n) / (12.0 * double(n));
  std::printf("bench_ports: cpu=\"%s\" clock %.2f GHz (dependent adds), cycles per iteration, best of 5\n",
              ember::perf::bench_cpu_info().c_str(), 1e-9 / cycle);
  const struct {
    const char* name;
    Loop loop;
  } tests[] = {
      {"6 vpmaddubsw", maddubs_alone},
      {"12 vpmaddubsw", maddubs_x12},
      {"6 vpmaddubsw + 6 vpmaddwd", with_madd},
      {"6 vpmaddubsw + 6 vpsignb", with_sign},
      {"6 vpmaddubsw + 6 vfmadd231ps", with_fma},
      {"6 vpmaddubsw + 6 vcvtdq2ps", with_cvt},
      {"6 vpmaddubsw + 6 (vpxor + vpsubb)", with_xorsub},
      {"6 vpmaddubsw + 6 vshufps", with_shufps},
      {"6 steps of the sign trick", steps_sign_trick},
      {"6 steps of the int16 panel", steps_int16},
  };
  for (const auto& t : tests)
    std::printf("  %-36s %5.2f\n", t.name, best_seconds(t.loop, n) / double(n) / cycle);
  return 0;
}
