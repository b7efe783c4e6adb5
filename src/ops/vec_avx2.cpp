// AVX2+FMA+F16C twins of ops/vec.cpp (also used on the AVX-512 path: these kernels are
// memory-bound and elementwise, so wider vectors buy nothing and the bits are the same).
#include <immintrin.h>

#include "ops/vec.h"
#include "util/f16.h"

#include <cmath>

namespace ember::ops::detail {

void axpy_f32_avx2(float a, const float* x, float* y, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] = std::fma(a, x[i], y[i]);
}

// y in registers, 64 columns (8 independent FMA chains: the latency of one chain is 4 cycles
// and two FMAs issue per cycle, so 32 columns would run at half the rate), then 32, 8, 1.
void axpy_rows_f32_avx2(const float* w, const float* x, int64_t rows, int64_t n, float* y) {
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m256 acc[8];
    #pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) acc[c] = _mm256_loadu_ps(y + i + 8 * c);
    for (int64_t r = 0; r < rows; ++r) {
      const __m256 a = _mm256_broadcast_ss(w + r);
      const float* xr = x + r * n + i;
      #pragma GCC unroll 8
      for (int c = 0; c < 8; ++c) acc[c] = _mm256_fmadd_ps(a, _mm256_loadu_ps(xr + 8 * c), acc[c]);
    }
    #pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) _mm256_storeu_ps(y + i + 8 * c, acc[c]);
  }
  for (; i + 32 <= n; i += 32) {
    __m256 y0 = _mm256_loadu_ps(y + i), y1 = _mm256_loadu_ps(y + i + 8),
           y2 = _mm256_loadu_ps(y + i + 16), y3 = _mm256_loadu_ps(y + i + 24);
    for (int64_t r = 0; r < rows; ++r) {
      const __m256 a = _mm256_set1_ps(w[r]);
      const float* xr = x + r * n + i;
      y0 = _mm256_fmadd_ps(a, _mm256_loadu_ps(xr), y0);
      y1 = _mm256_fmadd_ps(a, _mm256_loadu_ps(xr + 8), y1);
      y2 = _mm256_fmadd_ps(a, _mm256_loadu_ps(xr + 16), y2);
      y3 = _mm256_fmadd_ps(a, _mm256_loadu_ps(xr + 24), y3);
    }
    _mm256_storeu_ps(y + i, y0);
    _mm256_storeu_ps(y + i + 8, y1);
    _mm256_storeu_ps(y + i + 16, y2);
    _mm256_storeu_ps(y + i + 24, y3);
  }
  for (; i + 8 <= n; i += 8) {
    __m256 y0 = _mm256_loadu_ps(y + i);
    for (int64_t r = 0; r < rows; ++r)
      y0 = _mm256_fmadd_ps(_mm256_set1_ps(w[r]), _mm256_loadu_ps(x + r * n + i), y0);
    _mm256_storeu_ps(y + i, y0);
  }
  for (; i < n; ++i) {
    float yi = y[i];
    for (int64_t r = 0; r < rows; ++r) yi = std::fma(w[r], x[r * n + i], yi);
    y[i] = yi;
  }
}

// axpy_rows_f32_avx2 for NW outputs sharing x, 32 columns at a time: 4 NW independent chains
// (12 for NW = 3: one output's 8 match the FMA latency times its issue rate with nothing to
// spare), each row of x loaded once for all NW. The x loads stay memory operands of the FMAs
// (12 accumulators and a broadcast fill the 16 registers). Then 8 columns, then 1.
// bench_attention (Emerald Rapids, 112 queries, head_dim 64 / 128): 75-78 GFLOP/s one output
// at a time, 88 with NW = 3 (93 % of the FMA peak).
template <int NW>
void axpy_rows_group_avx2(const float* const* w, const float* x, int64_t rows, int64_t n,
                          float* const* y) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256 acc[NW][4];
    #pragma GCC unroll 4
    for (int k = 0; k < NW; ++k)
      #pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) acc[k][c] = _mm256_loadu_ps(y[k] + i + 8 * c);
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * n + i;
      #pragma GCC unroll 4
      for (int k = 0; k < NW; ++k) {
        const __m256 a = _mm256_broadcast_ss(w[k] + r);
        #pragma GCC unroll 4
        for (int c = 0; c < 4; ++c)
          acc[k][c] = _mm256_fmadd_ps(a, _mm256_loadu_ps(xr + 8 * c), acc[k][c]);
      }
    }
    #pragma GCC unroll 4
    for (int k = 0; k < NW; ++k)
      #pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) _mm256_storeu_ps(y[k] + i + 8 * c, acc[k][c]);
  }
  for (; i + 8 <= n; i += 8) {
    __m256 acc[NW];
    #pragma GCC unroll 4
    for (int k = 0; k < NW; ++k) acc[k] = _mm256_loadu_ps(y[k] + i);
    for (int64_t r = 0; r < rows; ++r)
      #pragma GCC unroll 4
      for (int k = 0; k < NW; ++k)
        acc[k] = _mm256_fmadd_ps(_mm256_broadcast_ss(w[k] + r), _mm256_loadu_ps(x + r * n + i), acc[k]);
    #pragma GCC unroll 4
    for (int k = 0; k < NW; ++k) _mm256_storeu_ps(y[k] + i, acc[k]);
  }
  for (; i < n; ++i)
    for (int k = 0; k < NW; ++k) {
      float yi = y[k][i];
      for (int64_t r = 0; r < rows; ++r) yi = std::fma(w[k][r], x[r * n + i], yi);
      y[k][i] = yi;
    }
}

void axpy_rows_f32_shared_avx2(const float* const* w, const float* x, int64_t rows, int64_t n,
                               float* const* y, int count) {
  int k = 0;
  for (; k + 3 <= count; k += 3) axpy_rows_group_avx2<3>(w + k, x, rows, n, y + k);
  if (count - k == 2) axpy_rows_group_avx2<2>(w + k, x, rows, n, y + k);
  else if (count - k == 1) axpy_rows_f32_avx2(w[k], x, rows, n, y[k]);
}

// 8 keys per ymm, key c in lane c % 8 of vector c / 8, each lane carrying its own key's 16
// canonical accumulators (ops/dot.h). A tile is NQ queries x KV vectors of keys: the chain of
// canonical lane l runs for all NQ x KV (query, key vector) pairs at once, so each key load
// serves NQ queries and each query broadcast KV vectors, and the NQ x KV chains are
// independent (enough of them to cover the FMA latency: 4 x 2 = 8 on Zen 3 / Zen 4). The
// chains of lanes l and l + 8 run one after the other, their sum (the tree's first level) goes
// to a stack buffer, and the rest of the tree runs from there once the 8 sums are done.
namespace {
template <int NQ, int KV, bool kTail, int NJ>
__attribute__((always_inline)) inline void lane_chain(const float* const* q, const float* base,
                                                      int64_t n, int64_t ld, int64_t l,
                                                      __m256i m, __m256 (&acc)[NQ][KV]) {
  #pragma GCC unroll 8
  for (int i = 0; i < NQ; ++i)
    #pragma GCC unroll 4
    for (int v = 0; v < KV; ++v) acc[i][v] = _mm256_setzero_ps();
  const int64_t len = NJ ? NJ : n;
  #pragma GCC unroll 8
  for (int64_t j = l; j < len; j += 16) {
    __m256 k[KV];
    #pragma GCC unroll 4
    for (int v = 0; v < KV; ++v)
      k[v] = !kTail || v + 1 < KV ? _mm256_loadu_ps(base + j * ld + 8 * v)
                                  : _mm256_maskload_ps(base + j * ld + 8 * v, m);
    #pragma GCC unroll 8
    for (int i = 0; i < NQ; ++i) {
      const __m256 b = _mm256_broadcast_ss(q[i] + j);
      #pragma GCC unroll 4
      for (int v = 0; v < KV; ++v) acc[i][v] = _mm256_fmadd_ps(b, k[v], acc[i][v]);
    }
  }
}

// out[i][8 v + c] for the tile's NQ queries and 8 KV keys; with kTail, the last vector's keys
// are the lanes of mask m (vmaskmovps: the other lanes are neither read nor written).
template <int NQ, int KV, bool kTail, int NJ>
void keys_tile(const float* const* q, const float* base, int64_t n, int64_t ld, __m256i m,
               __m256 vs, float* const* out) {
  __m256 s8[8][NQ][KV];
  for (int l = 0; l < 8; ++l) {
    __m256 a[NQ][KV];
    lane_chain<NQ, KV, kTail, NJ>(q, base, n, ld, l, m, a);
    #pragma GCC unroll 8
    for (int i = 0; i < NQ; ++i)
      #pragma GCC unroll 4
      for (int v = 0; v < KV; ++v) s8[l][i][v] = a[i][v];
    lane_chain<NQ, KV, kTail, NJ>(q, base, n, ld, l + 8, m, a);
    #pragma GCC unroll 8
    for (int i = 0; i < NQ; ++i)
      #pragma GCC unroll 4
      for (int v = 0; v < KV; ++v) s8[l][i][v] = _mm256_add_ps(s8[l][i][v], a[i][v]);
  }
  #pragma GCC unroll 8
  for (int i = 0; i < NQ; ++i)
    #pragma GCC unroll 4
    for (int v = 0; v < KV; ++v) {
      const __m256 s4_0 = _mm256_add_ps(s8[0][i][v], s8[4][i][v]),
                   s4_1 = _mm256_add_ps(s8[1][i][v], s8[5][i][v]),
                   s4_2 = _mm256_add_ps(s8[2][i][v], s8[6][i][v]),
                   s4_3 = _mm256_add_ps(s8[3][i][v], s8[7][i][v]);
      const __m256 r = _mm256_mul_ps(
          _mm256_add_ps(_mm256_add_ps(s4_0, s4_2), _mm256_add_ps(s4_1, s4_3)), vs);
      if (!kTail || v + 1 < KV) _mm256_storeu_ps(out[i] + 8 * v, r);
      else _mm256_maskstore_ps(out[i] + 8 * v, m, r);
    }
}

// NQ queries against all the keys: tiles of 24 keys (12 chains), then 16, then 8 or fewer.
template <int NQ, int NJ>
void keys_queries(const float* q, const float* kt, int64_t keys, int64_t n, int64_t ld,
                  __m256 vs, float* out, int64_t out_ld) {
  const float* qs[NQ];
  float* os[NQ];
  #pragma GCC unroll 8
  for (int i = 0; i < NQ; ++i) qs[i] = q + i * n;
  auto at = [&](int64_t col) {
    #pragma GCC unroll 8
    for (int i = 0; i < NQ; ++i) os[i] = out + i * out_ld + col;
    return os;
  };
  const __m256i all = _mm256_set1_epi32(-1);
  int64_t c = 0;
  for (; c + 24 <= keys; c += 24) keys_tile<NQ, 3, false, NJ>(qs, kt + c, n, ld, all, vs, at(c));
  for (; c + 16 <= keys; c += 16) keys_tile<NQ, 2, false, NJ>(qs, kt + c, n, ld, all, vs, at(c));
  for (; c < keys; c += 8) {
    const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(int(keys - c < 8 ? keys - c : 8)),
                                         _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    keys_tile<NQ, 1, true, NJ>(qs, kt + c, n, ld, m, vs, at(c));
  }
}

// All nq queries, 4 at a time. NJ is the head dim when it is one of the common ones (64, 128),
// 0 otherwise: a chain of a known length (4 or 8 steps) unrolls, and at head dim 64 its loop
// overhead was a tenth of the kernel (bench_attention avx2 64 112 72: keys 60.5 -> 66 GFLOP/s).
template <int NJ>
void keys_all(const float* q, int64_t nq, const float* kt, int64_t keys, int64_t n, int64_t ld,
              __m256 vs, float* out, int64_t out_ld) {
  int64_t i = 0;
  for (; i + 4 <= nq; i += 4) keys_queries<4, NJ>(q + i * n, kt, keys, n, ld, vs, out + i * out_ld, out_ld);
  switch (nq - i) {
    case 3: return keys_queries<3, NJ>(q + i * n, kt, keys, n, ld, vs, out + i * out_ld, out_ld);
    case 2: return keys_queries<2, NJ>(q + i * n, kt, keys, n, ld, vs, out + i * out_ld, out_ld);
    case 1: return keys_queries<1, NJ>(q + i * n, kt, keys, n, ld, vs, out + i * out_ld, out_ld);
    default: return;
  }
}
}  // namespace

void dot_f32_keys_avx2(const float* q, int64_t nq, const float* kt, int64_t keys, int64_t n,
                       int64_t ld, float scale, float* out, int64_t out_ld) {
  const __m256 vs = _mm256_set1_ps(scale);
  if (n == 64) return keys_all<64>(q, nq, kt, keys, n, ld, vs, out, out_ld);
  if (n == 128) return keys_all<128>(q, nq, kt, keys, n, ld, vs, out, out_ld);
  keys_all<0>(q, nq, kt, keys, n, ld, vs, out, out_ld);
}

void f16_to_f32_row_avx2(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(
                                  reinterpret_cast<const __m128i*>(src + i))));
  for (; i < n; ++i) dst[i] = f16_to_f32(src[i]);
}

void f32_to_f16_row_avx2(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) dst[i] = f32_to_f16(src[i]);
}

void divide_round_f16_row_avx2(const float* x, float d, int64_t n, float* out) {
  const __m256 vd = _mm256_set1_ps(d);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm256_cvtps_ph(
                                  _mm256_div_ps(_mm256_loadu_ps(x + i), vd), _MM_FROUND_TO_NEAREST_INT)));
  for (; i < n; ++i) out[i] = f16_to_f32(f32_to_f16(x[i] / d));
}

// 8 x 8 blocks: eight rows of 8 halves converted (vcvtph2ps), transposed in registers
// (unpack, shuffle, 128-bit permute), stored as eight columns; the edges one value at a time.
void f16_rows_to_f32_columns_avx2(const uint16_t* src, int64_t rows, int64_t n, float* dst,
                                  int64_t ld) {
  int64_t r = 0;
  for (; r + 8 <= rows; r += 8) {
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
      __m256 v[8];
      #pragma GCC unroll 8
      for (int i = 0; i < 8; ++i)
        v[i] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + (r + i) * n + j)));
      const __m256 t0 = _mm256_unpacklo_ps(v[0], v[1]), t1 = _mm256_unpackhi_ps(v[0], v[1]),
                   t2 = _mm256_unpacklo_ps(v[2], v[3]), t3 = _mm256_unpackhi_ps(v[2], v[3]),
                   t4 = _mm256_unpacklo_ps(v[4], v[5]), t5 = _mm256_unpackhi_ps(v[4], v[5]),
                   t6 = _mm256_unpacklo_ps(v[6], v[7]), t7 = _mm256_unpackhi_ps(v[6], v[7]);
      const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
                   u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
                   u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
                   u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
      float* d = dst + j * ld + r;
      _mm256_storeu_ps(d + 0 * ld, _mm256_permute2f128_ps(u0, u4, 0x20));
      _mm256_storeu_ps(d + 1 * ld, _mm256_permute2f128_ps(u1, u5, 0x20));
      _mm256_storeu_ps(d + 2 * ld, _mm256_permute2f128_ps(u2, u6, 0x20));
      _mm256_storeu_ps(d + 3 * ld, _mm256_permute2f128_ps(u3, u7, 0x20));
      _mm256_storeu_ps(d + 4 * ld, _mm256_permute2f128_ps(u0, u4, 0x31));
      _mm256_storeu_ps(d + 5 * ld, _mm256_permute2f128_ps(u1, u5, 0x31));
      _mm256_storeu_ps(d + 6 * ld, _mm256_permute2f128_ps(u2, u6, 0x31));
      _mm256_storeu_ps(d + 7 * ld, _mm256_permute2f128_ps(u3, u7, 0x31));
    }
    for (; j < n; ++j)
      for (int64_t i = 0; i < 8; ++i) dst[j * ld + r + i] = _cvtsh_ss(src[(r + i) * n + j]);
  }
  for (; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) dst[j * ld + r] = _cvtsh_ss(src[r * n + j]);
}

}  // namespace ember::ops::detail
