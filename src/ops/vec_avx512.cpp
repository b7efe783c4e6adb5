// AVX-512 twins of the attention row kernels of ops/vec.h: the key scores (16 keys per zmm)
// and the value rows (64 floats of the output per four zmm). The same operations per element
// as the scalar and AVX2 code (tests/ops/activations_test.cpp), twice as many lanes per
// instruction: these two kernels are most of the attention time of a long prefill.
// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized on their own _mm512_undefined_*()
// placeholders (GCC bug 105593); the warning is about the header, not this code.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>

namespace ember::ops::detail {

namespace {
// As in vec_avx2.cpp, with 16 keys per zmm: a tile of NQ queries x KV vectors of keys runs the
// chain of canonical lane l for all NQ x KV pairs at once (each key load serves NQ queries),
// the chains of lanes l and l + 8 one after the other, their sums through a stack buffer. The
// last vector of a tile may be partial (mask m: loads and stores of the valid keys only).
template <int NQ, int KV, int NJ>
__attribute__((always_inline)) inline void lane_chain(const float* const* q, const float* base,
                                                      int64_t n, int64_t ld, int64_t l,
                                                      __mmask16 m, __m512 (&acc)[NQ][KV]) {
  #pragma GCC unroll 8
  for (int i = 0; i < NQ; ++i)
    #pragma GCC unroll 4
    for (int v = 0; v < KV; ++v) acc[i][v] = _mm512_setzero_ps();
  const int64_t len = NJ ? NJ : n;
  #pragma GCC unroll 8
  for (int64_t j = l; j < len; j += 16) {
    __m512 k[KV];
    #pragma GCC unroll 4
    for (int v = 0; v < KV; ++v)
      k[v] = v + 1 < KV ? _mm512_loadu_ps(base + j * ld + 16 * v)
                        : _mm512_maskz_loadu_ps(m, base + j * ld + 16 * v);
    #pragma GCC unroll 8
    for (int i = 0; i < NQ; ++i) {
      const __m512 b = _mm512_set1_ps(q[i][j]);
      #pragma GCC unroll 4
      for (int v = 0; v < KV; ++v) acc[i][v] = _mm512_fmadd_ps(b, k[v], acc[i][v]);
    }
  }
}

template <int NQ, int KV, int NJ>
void keys_tile(const float* const* q, const float* base, int64_t n, int64_t ld, __mmask16 m,
               __m512 vs, float* const* out) {
  __m512 s8[8][NQ][KV];
  for (int l = 0; l < 8; ++l) {
    __m512 a[NQ][KV];
    lane_chain<NQ, KV, NJ>(q, base, n, ld, l, m, a);
    #pragma GCC unroll 8
    for (int i = 0; i < NQ; ++i)
      #pragma GCC unroll 4
      for (int v = 0; v < KV; ++v) s8[l][i][v] = a[i][v];
    lane_chain<NQ, KV, NJ>(q, base, n, ld, l + 8, m, a);
    #pragma GCC unroll 8
    for (int i = 0; i < NQ; ++i)
      #pragma GCC unroll 4
      for (int v = 0; v < KV; ++v) s8[l][i][v] = _mm512_add_ps(s8[l][i][v], a[i][v]);
  }
  #pragma GCC unroll 8
  for (int i = 0; i < NQ; ++i)
    #pragma GCC unroll 4
    for (int v = 0; v < KV; ++v) {
      const __m512 s4_0 = _mm512_add_ps(s8[0][i][v], s8[4][i][v]),
                   s4_1 = _mm512_add_ps(s8[1][i][v], s8[5][i][v]),
                   s4_2 = _mm512_add_ps(s8[2][i][v], s8[6][i][v]),
                   s4_3 = _mm512_add_ps(s8[3][i][v], s8[7][i][v]);
      const __m512 r = _mm512_mul_ps(
          _mm512_add_ps(_mm512_add_ps(s4_0, s4_2), _mm512_add_ps(s4_1, s4_3)), vs);
      if (v + 1 < KV) _mm512_storeu_ps(out[i] + 16 * v, r);
      else _mm512_mask_storeu_ps(out[i] + 16 * v, m, r);
    }
}

// NQ queries against all the keys: tiles of 64 keys (16 chains), then 32, then 16 or fewer.
template <int NQ, int NJ>
void keys_queries(const float* q, const float* kt, int64_t keys, int64_t n, int64_t ld,
                  __m512 vs, float* out, int64_t out_ld) {
  const float* qs[NQ];
  float* os[NQ];
  #pragma GCC unroll 8
  for (int i = 0; i < NQ; ++i) qs[i] = q + i * n;
  auto at = [&](int64_t col) {
    #pragma GCC unroll 8
    for (int i = 0; i < NQ; ++i) os[i] = out + i * out_ld + col;
    return os;
  };
  const __mmask16 all = 0xFFFF;
  int64_t c = 0;
  for (; c + 64 <= keys; c += 64) keys_tile<NQ, 4, NJ>(qs, kt + c, n, ld, all, vs, at(c));
  for (; c + 32 <= keys; c += 32) keys_tile<NQ, 2, NJ>(qs, kt + c, n, ld, all, vs, at(c));
  for (; c < keys; c += 16) {
    const __mmask16 m = keys - c >= 16 ? all : __mmask16((1u << (keys - c)) - 1);
    keys_tile<NQ, 1, NJ>(qs, kt + c, n, ld, m, vs, at(c));
  }
}

// All nq queries, 4 at a time; NJ as in vec_avx2.cpp (the head dim when it is 64 or 128).
template <int NJ>
void keys_all(const float* q, int64_t nq, const float* kt, int64_t keys, int64_t n, int64_t ld,
              __m512 vs, float* out, int64_t out_ld) {
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

void dot_f32_keys_avx512(const float* q, int64_t nq, const float* kt, int64_t keys, int64_t n,
                         int64_t ld, float scale, float* out, int64_t out_ld) {
  const __m512 vs = _mm512_set1_ps(scale);
  if (n == 64) return keys_all<64>(q, nq, kt, keys, n, ld, vs, out, out_ld);
  if (n == 128) return keys_all<128>(q, nq, kt, keys, n, ld, vs, out, out_ld);
  keys_all<0>(q, nq, kt, keys, n, ld, vs, out, out_ld);
}

void axpy_rows_f32_avx512(const float* w, const float* x, int64_t rows, int64_t n, float* y) {
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m512 y0 = _mm512_loadu_ps(y + i), y1 = _mm512_loadu_ps(y + i + 16),
           y2 = _mm512_loadu_ps(y + i + 32), y3 = _mm512_loadu_ps(y + i + 48);
    for (int64_t r = 0; r < rows; ++r) {
      const __m512 a = _mm512_set1_ps(w[r]);
      const float* xr = x + r * n + i;
      y0 = _mm512_fmadd_ps(a, _mm512_loadu_ps(xr), y0);
      y1 = _mm512_fmadd_ps(a, _mm512_loadu_ps(xr + 16), y1);
      y2 = _mm512_fmadd_ps(a, _mm512_loadu_ps(xr + 32), y2);
      y3 = _mm512_fmadd_ps(a, _mm512_loadu_ps(xr + 48), y3);
    }
    _mm512_storeu_ps(y + i, y0);
    _mm512_storeu_ps(y + i + 16, y1);
    _mm512_storeu_ps(y + i + 32, y2);
    _mm512_storeu_ps(y + i + 48, y3);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    __m512 y0 = _mm512_maskz_loadu_ps(m, y + i);
    for (int64_t r = 0; r < rows; ++r)
      y0 = _mm512_fmadd_ps(_mm512_set1_ps(w[r]), _mm512_maskz_loadu_ps(m, x + r * n + i), y0);
    _mm512_mask_storeu_ps(y + i, m, y0);
  }
}

// axpy_rows_f32_avx512 for NW outputs sharing x, 64 columns at a time: 4 NW independent
// chains (one output's 4 leave the FMA units idle half the time: their latency is 4 cycles and
// two issue per cycle), each row of x loaded once into registers for all NW. bench_attention
// (Emerald Rapids, 112 queries, head_dim 64 / 128): 91-107 GFLOP/s one output at a time, NW = 3
// 119-125, NW = 4 142-164 (82-94 % of the FMA peak), NW = 5 150. Then 16 columns
// at a time, the last masked.
template <int NW>
void axpy_rows_group_avx512(const float* const* w, const float* x, int64_t rows, int64_t n,
                            float* const* y) {
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m512 acc[NW][4];
    #pragma GCC unroll 4
    for (int k = 0; k < NW; ++k)
      #pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) acc[k][c] = _mm512_loadu_ps(y[k] + i + 16 * c);
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * n + i;
      __m512 xv[4];
      #pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) xv[c] = _mm512_loadu_ps(xr + 16 * c);
      #pragma GCC unroll 4
      for (int k = 0; k < NW; ++k) {
        const __m512 a = _mm512_set1_ps(w[k][r]);
        #pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) acc[k][c] = _mm512_fmadd_ps(a, xv[c], acc[k][c]);
      }
    }
    #pragma GCC unroll 4
    for (int k = 0; k < NW; ++k)
      #pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) _mm512_storeu_ps(y[k] + i + 16 * c, acc[k][c]);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    __m512 acc[NW];
    #pragma GCC unroll 4
    for (int k = 0; k < NW; ++k) acc[k] = _mm512_maskz_loadu_ps(m, y[k] + i);
    for (int64_t r = 0; r < rows; ++r) {
      const __m512 xv = _mm512_maskz_loadu_ps(m, x + r * n + i);
      #pragma GCC unroll 4
      for (int k = 0; k < NW; ++k) acc[k] = _mm512_fmadd_ps(_mm512_set1_ps(w[k][r]), xv, acc[k]);
    }
    #pragma GCC unroll 4
    for (int k = 0; k < NW; ++k) _mm512_mask_storeu_ps(y[k] + i, m, acc[k]);
  }
}

void axpy_rows_f32_shared_avx512(const float* const* w, const float* x, int64_t rows, int64_t n,
                                 float* const* y, int count) {
  int k = 0;
  for (; k + 4 <= count; k += 4) axpy_rows_group_avx512<4>(w + k, x, rows, n, y + k);
  switch (count - k) {
    case 3: return axpy_rows_group_avx512<3>(w + k, x, rows, n, y + k);
    case 2: return axpy_rows_group_avx512<2>(w + k, x, rows, n, y + k);
    case 1: return axpy_rows_f32_avx512(w[k], x, rows, n, y[k]);
    default: return;
  }
}

}  // namespace ember::ops::detail
