#pragma once
// Internal to ops/, and only for the AVX2 translation units (*_avx2.cpp, compiled with AVX2
// flags): the helpers and the tile and panel drivers (ops/tile_driver.h, shared with the AVX-512
// file) that kernels_avx2.cpp (float and 32-block types) and kernels_kquants_avx2.cpp (K quants)
// share. Everything is in an anonymous namespace, so each of those files has its own
// copy and no AVX2 code can reach a caller on another path through the linker's choice of
// inline copies.
#ifndef __AVX2__
#error "kernels_avx2_driver.h is for the AVX2 translation units only"
#endif
#include <immintrin.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "ops/kernels.h"
#include "ops/prefetch.h"

// Which build of the AVX2 kernel source this translation unit is. kernels_avx2.cpp is compiled
// three times, with only the 32-block types' int8 dot products differing (dot4, the bias form
// of the Q32K tile, and the VNNI builds' prefill panel Q32Vnni, ops/q32_vnni_panel.h: the same
// integers):
//   EMBER_AVX2_VNNI 0 (kernels_avx2.cpp): vpmaddubsw + vpmaddwd;
//   1 (kernels_avxvnni.cpp, -mavxvnni): AVX-VNNI's VEX vpdpbusd on ymm;
//   2 (kernels_avxvnni_evex.cpp, -mavx512vl -mavx512vnni): the EVEX encoding of the same
//     instruction on ymm, the validation twin (util/simd.h) for CPUs with AVX512-VNNI and no
//     AVX-VNNI. Built with ymm16-31 reserved (CMakeLists.txt), so that it has the 16 vector
//     registers the VEX build has.
// Each build names its kernel table accessor as kernels.h declares it (EMBER_AVX2_TABLE). The
// K quants (kernels_kquants_avx2.cpp) are built the same three ways (kernels_kquants_avxvnni*.cpp):
// their prefill panel (ops/k_panel.h) and decode tiles (dot2_acc below) accumulate with
// vpdpwssd where there is VNNI.
#ifndef EMBER_AVX2_VNNI
#define EMBER_AVX2_VNNI 0
#endif
#if EMBER_AVX2_VNNI == 1
#ifndef __AVXVNNI__
#error "the avxvnni build needs -mavxvnni"
#endif
#define EMBER_AVX2_TABLE avxvnni_kernels
#elif EMBER_AVX2_VNNI == 2
#if !defined(__AVX512VNNI__) || !defined(__AVX512VL__)
#error "the avxvnni-evex build needs -mavx512vl -mavx512vnni"
#endif
#define EMBER_AVX2_TABLE avxvnni_evex_kernels
#else
#define EMBER_AVX2_TABLE avx2_kernels
#endif

namespace ember::ops::detail {

// The K-quant kernels of kernels_kquants_avx2.cpp, one build per table like this file's:
// EMBER_KQUANT(q4_k) is q4_k_avx2, q4_k_avxvnni or q4_k_avxvnni_evex.
#if EMBER_AVX2_VNNI == 1
#define EMBER_KQUANT(name) name##_avxvnni
#elif EMBER_AVX2_VNNI == 2
#define EMBER_KQUANT(name) name##_avxvnni_evex
#else
#define EMBER_KQUANT(name) name##_avx2
#endif
void EMBER_KQUANT(q4_k)(const WeightMatrix& W, const Activations& a, int64_t r0, int64_t r1,
                        float* y);
void EMBER_KQUANT(q5_k)(const WeightMatrix& W, const Activations& a, int64_t r0, int64_t r1,
                        float* y);
void EMBER_KQUANT(q6_k)(const WeightMatrix& W, const Activations& a, int64_t r0, int64_t r1,
                        float* y);

namespace {

// Exact int8 dot products. dot4: int32 lane i = the sum over bytes 4i..4i+3 of u * s (u
// unsigned, s signed); without VNNI through vpmaddubsw (whose int16 saturation never triggers
// in these kernels: |u| <= 128 against |s| <= 127, or u <= 63) and vpmaddwd against ones.
// dot2_acc: acc + the sum of the two int16 products of lane i (vpmaddwd + vpaddd). The same
// integers in every build, so the same bits.
#if EMBER_AVX2_VNNI
// acc + dot4 in one instruction, without saturation (VNNI builds only).
inline __m256i dpbusd(__m256i acc, __m256i u, __m256i s) {
#if EMBER_AVX2_VNNI == 1
  return _mm256_dpbusd_avx_epi32(acc, u, s);
#else
  return _mm256_dpbusd_epi32(acc, u, s);
#endif
}
#endif
inline __m256i dot4(__m256i u, __m256i s, __m256i ones16) {
#if EMBER_AVX2_VNNI
  (void)ones16;
  return dpbusd(_mm256_setzero_si256(), u, s);
#else
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), ones16);
#endif
}
// In the VNNI builds one vpdpwssd, the same integers: the K quants' decode tile keeps its sum
// a chain (an empty asm), on which vpdpwssd's latency is hidden behind the other row's work,
// and the instruction saved per group and row was worth +8 % of Q4_K decode in L2
// (bench_matmul 1 avxvnni 1 q4_K 512,2048, Zen 5: 91 -> 99 GOP/s; a C++ tile whose sums
// GCC had made a tree measured slower with it on Zen 4).
inline __m256i dot2_acc(__m256i acc, __m256i a16, __m256i b16) {
#if EMBER_AVX2_VNNI == 1
  return _mm256_dpwssd_avx_epi32(acc, a16, b16);
#elif EMBER_AVX2_VNNI == 2
  return _mm256_dpwssd_epi32(acc, a16, b16);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(a16, b16));
#endif
}

inline float h2f(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

inline float tree8(__m256 acc) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}
inline float tree16(__m256 lo, __m256 hi) { return tree8(_mm256_add_ps(lo, hi)); }

// Lane-valid mask for the tail: lane l of half h is valid when 8h + l < r.
inline __m256 tail_mask(int r, int h) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(r - 8 * h), idx));
}

// ---- The tile and panel drivers (ops/tile_driver.h, included into this anonymous namespace
// so that each AVX2 file has its own copy). The L2 budget is the one per-ISA setting: here half the core's
// L2 (kernels.h; 256 KiB, the value tuned in 04d1f45, on a core where that is unknown).
inline int64_t tile_l2_budget() { return avx2_tile_l2_budget(); }
#include "ops/tile_driver.h"

}  // namespace
}  // namespace ember::ops::detail
