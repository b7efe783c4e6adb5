#pragma once
// Internal to ops/, and only for the AVX2 translation units (*_avx2.cpp, compiled with AVX2
// flags): the helpers and the tile and panel drivers that kernels_avx2.cpp (float and 32-block
// types) and kernels_kquants_avx2.cpp (K quants) share. Everything is in an anonymous
// namespace, so each of those files has its own copy and no AVX2 code can reach a caller on
// another path through the linker's choice of inline copies.
#ifndef __AVX2__
#error "kernels_avx2_driver.h is for the AVX2 translation units only"
#endif
#include <immintrin.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "ops/kernels.h"
#include "ops/prefetch.h"

namespace ember::ops::detail {

// The K-quant kernels of kernels_kquants_avx2.cpp, for avx2_kernels().
void q4_k_avx2(const WeightMatrix& W, const Activations& a, int64_t r0, int64_t r1, float* y);
void q5_k_avx2(const WeightMatrix& W, const Activations& a, int64_t r0, int64_t r1, float* y);
void q6_k_avx2(const WeightMatrix& W, const Activations& a, int64_t r0, int64_t r1, float* y);

namespace {

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

// ---- The tile driver (see kernels_avx512.cpp) --------------------------------------------
template <class K, int R, int T>
void tile_call(const WeightMatrix& W, const Activations& a, int64_t rb, int64_t i, int64_t t0,
               float* y) {
  const uint8_t* rows[R];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) rows[r] = W.data + (i + r) * rb;
  float out[R * T];
  K::template tile<R, T>(rows, a, t0, out);
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 8
    for (int t = 0; t < T; ++t) y[(t0 + t) * W.rows + i + r] = out[r * T + t];
}

// A tile of R rows x `rem` tokens, rem < T (the remainder of a token chunk).
template <class K, int R, int T>
void tail_call(const WeightMatrix& W, const Activations& a, int64_t rb, int64_t i, int64_t t0,
               int64_t rem, float* y) {
  if constexpr (T > 1) {
    if (rem == T - 1) tile_call<K, R, T - 1>(W, a, rb, i, t0, y);
    else tail_call<K, R, T - 1>(W, a, rb, i, t0, rem, y);
  }
}

// Rows [i, i + R) x tokens [t0, t1).
template <class K, int R>
void row_block(const WeightMatrix& W, const Activations& a, int64_t rb, int64_t i, int64_t t0,
               int64_t t1, float* y) {
  int64_t t = t0;
  for (; t + K::kT <= t1; t += K::kT) tile_call<K, R, K::kT>(W, a, rb, i, t, y);
  if (t < t1) tail_call<K, R, K::kT>(W, a, rb, i, t, t1 - t, y);
}

// Tokens per chunk, as in kernels_avx512.cpp: the chunk's activations stay in L2 while the
// row blocks of the thread's range pass over them.
template <class K>
int64_t token_chunk(int64_t k) {
  constexpr int64_t kL2Budget = 256 << 10;
  const int64_t c = kL2Budget / (k * K::kActBytes) / K::kT * K::kT;
  return c < K::kT ? K::kT : c;
}

template <class K>
void run_tiles(const WeightMatrix& W, const Activations& a, int64_t r0, int64_t r1, float* y) {
  const int64_t rb = weight_row_bytes(K::kType, W.cols);
  // Decode (one token): two row streams, [r0, mid) and [mid, r1), one row of each per step.
  // Each stream walks memory strictly in order, which the hardware prefetcher follows (a tile
  // of adjacent rows, i.e. several short interleaved streams, measured at less than half the
  // bandwidth), and the two rows' accumulator chains overlap in the core (one row alone is
  // bound by its FMA chain: +15 % for a decode step, 1 thread, Zen 4). The tiles also prefetch
  // each stream ahead in software (prefetch.h): the hardware prefetcher alone fell behind.
  if (a.n == 1) {
    const int64_t half = (r1 - r0) / 2;
    for (int64_t j = 0; j < half; ++j) {
      const uint8_t* rows[2] = {W.data + (r0 + j) * rb, W.data + (r0 + half + j) * rb};
      float out[2];
      K::template tile<2, 1>(rows, a, 0, out);
      y[r0 + j] = out[0];
      y[r0 + half + j] = out[1];
    }
    if ((r1 - r0) % 2) row_block<K, 1>(W, a, rb, r1 - 1, 0, 1, y);
    return;
  }
  // Prefill: token chunks outermost, then row blocks, then the chunk's token tiles.
  const int64_t chunk = token_chunk<K>(a.k);
  for (int64_t t0 = 0; t0 < a.n; t0 += chunk) {
    const int64_t t1 = a.n < t0 + chunk ? a.n : t0 + chunk;
    int64_t i = r0;
    for (; i + K::kR <= r1; i += K::kR) row_block<K, K::kR>(W, a, rb, i, t0, t1, y);
    for (; i < r1; ++i) row_block<K, 1>(W, a, rb, i, t0, t1, y);
  }
}

// The last rem < P::kT tokens of a chunk: the tile of T = rem tokens.
template <class P, int T>
void panel_tail(const P& panel, const Activations& a, int64_t t0, int64_t rem, int64_t m,
                int64_t i, float* y) {
  if constexpr (T >= 1) {
    if (rem == T) panel.template tile<T>(a, t0, m, i, y);
    else panel_tail<P, T - 1>(panel, a, t0, rem, m, i, y);
  }
}

// Prefill through panels (Q32Panel, KPanel): token chunks, then row blocks of 4, each decoded
// once into the panel, then the chunk's token tiles. Decode, and the last rows of a range
// that are fewer than 4, go through K's tiles; without memory for a panel, everything does.
template <class K, class P>
void run_panels(const WeightMatrix& W, const Activations& a, int64_t r0, int64_t r1, float* y) {
  const int64_t bytes = (P::bytes(a.k) + 31) / 32 * 32;
  void* mem = a.n > 1 && r1 - r0 >= 4 ? std::aligned_alloc(32, size_t(bytes)) : nullptr;
  if (mem == nullptr) {
    run_tiles<K>(W, a, r0, r1, y);
    return;
  }
  P panel;
  panel.bind(static_cast<uint8_t*>(mem), a.k);
  const int64_t rb = weight_row_bytes(K::kType, W.cols);
  const int64_t chunk = token_chunk<K>(a.k);
  for (int64_t t0 = 0; t0 < a.n; t0 += chunk) {
    const int64_t t1 = a.n < t0 + chunk ? a.n : t0 + chunk;
    int64_t i = r0;
    for (; i + 4 <= r1; i += 4) {
      const uint8_t* rows[4] = {W.data + i * rb, W.data + (i + 1) * rb, W.data + (i + 2) * rb,
                                W.data + (i + 3) * rb};
      panel.fill(rows);
      int64_t t = t0;
      for (; t + P::kT <= t1; t += P::kT) panel.template tile<P::kT>(a, t, W.rows, i, y);
      if (t < t1) panel_tail<P, P::kT - 1>(panel, a, t, t1 - t, W.rows, i, y);
    }
    for (; i < r1; ++i) row_block<K, 1>(W, a, rb, i, t0, t1, y);
  }
  std::free(mem);
}

}  // namespace
}  // namespace ember::ops::detail
