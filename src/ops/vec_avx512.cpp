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
// The scores of up to 16 keys (nk) for NQ queries; key c in lane c, its canonical lanes l and
// l + 8 in two chains per query (see vec_avx2.cpp).
template <int NQ>
void keys_block16(const float* const* q, const float* base, int64_t nk, int64_t n, int64_t ld,
                  __m512 vs, float* const* out) {
  const __mmask16 m = nk >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << nk) - 1);
  __m512 s8[NQ][8];
  for (int l = 0; l < 8; ++l) {
    __m512 a0[NQ], a1[NQ];
    for (int i = 0; i < NQ; ++i) a0[i] = a1[i] = _mm512_setzero_ps();
    for (int64_t j = l; j < n; j += 16) {
      const __m512 k0 = _mm512_maskz_loadu_ps(m, base + j * ld);
      for (int i = 0; i < NQ; ++i) a0[i] = _mm512_fmadd_ps(_mm512_set1_ps(q[i][j]), k0, a0[i]);
      if (j + 8 < n) {
        const __m512 k1 = _mm512_maskz_loadu_ps(m, base + (j + 8) * ld);
        for (int i = 0; i < NQ; ++i)
          a1[i] = _mm512_fmadd_ps(_mm512_set1_ps(q[i][j + 8]), k1, a1[i]);
      }
    }
    for (int i = 0; i < NQ; ++i) s8[i][l] = _mm512_add_ps(a0[i], a1[i]);
  }
  for (int i = 0; i < NQ; ++i) {
    const __m512 s4_0 = _mm512_add_ps(s8[i][0], s8[i][4]), s4_1 = _mm512_add_ps(s8[i][1], s8[i][5]),
                 s4_2 = _mm512_add_ps(s8[i][2], s8[i][6]), s4_3 = _mm512_add_ps(s8[i][3], s8[i][7]);
    const __m512 r = _mm512_mul_ps(
        _mm512_add_ps(_mm512_add_ps(s4_0, s4_2), _mm512_add_ps(s4_1, s4_3)), vs);
    _mm512_mask_storeu_ps(out[i], m, r);
  }
}
}  // namespace

void dot_f32_keys_avx512(const float* q, int64_t nq, const float* kt, int64_t keys, int64_t n,
                         int64_t ld, float scale, float* out, int64_t out_ld) {
  const __m512 vs = _mm512_set1_ps(scale);
  int64_t i = 0;
  for (; i + 2 <= nq; i += 2) {
    const float* qs[2] = {q + i * n, q + (i + 1) * n};
    for (int64_t c = 0; c < keys; c += 16) {
      float* os[2] = {out + i * out_ld + c, out + (i + 1) * out_ld + c};
      keys_block16<2>(qs, kt + c, keys - c, n, ld, vs, os);
    }
  }
  if (i < nq) {
    const float* qs[1] = {q + i * n};
    for (int64_t c = 0; c < keys; c += 16) {
      float* os[1] = {out + i * out_ld + c};
      keys_block16<1>(qs, kt + c, keys - c, n, ld, vs, os);
    }
  }
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

}  // namespace ember::ops::detail
