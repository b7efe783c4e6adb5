#pragma once
// Elementwise and row kernels of the canonical-v1 numerics contract (docs/numerics.md) that
// are not matrix products: exp, SiLU, softmax. Each result depends only on its inputs and
// the row length, never on threads or the SIMD path: the vector twins (activations_avx512.cpp)
// perform exactly the scalar operation sequence lane by lane, and tests compare them bit for bit.
#include <cstdint>

namespace ember::ops {

// e^x in f32: Cody-Waite range reduction x = n*ln2 + r (|r| <= ln2/2, two-constant split
// with explicit FMAs), a degree-6 polynomial for e^r (Cephes expf coefficients, Horner with
// FMA), then the exact scaling by 2^n (in two steps so subnormal results round once, like a
// correct multiply would). Max error about 1 ulp. exp_f32(-inf) = 0, exp_f32(+inf) = +inf,
// x > 88.72: +inf, x < -103.97: 0, NaN -> NaN. Never calls libm, so every path agrees.
float exp_f32(float x);

// y[i] = exp_f32(x[i]) for i in [0, n). x and y may alias.
void exp_row(const float* x, int64_t n, float* y);

// SwiGLU gate: out[i] = silu(g[i]) * u[i] with silu(a) = a / (1 + exp_f32(-a)).
// g (n,), u (n,) -> out (n,); out may alias g or u.
void silu_mul_row(const float* g, const float* u, int64_t n, float* out);

// GELU, erf form (PyTorch nn.GELU's default): out[i] = 0.5 * x * (1 + erf(x / sqrt(2))), with
// erf from Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7): for z = |x| / sqrt(2),
// t = 1 / (1 + 0.3275911 z), erf(z) = 1 - t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) exp_f32(-z^2),
// sign restored; every step an f32 IEEE operation (no FMA contraction, no libm), scalar on
// every SIMD path. Used only by the toy models of `study recompute-anchor --activation gelu`.
// x (n,) -> out (n,); out may alias x.
void gelu_row(const float* x, int64_t n, float* out);

// In-place softmax of s (n,), n >= 1: m = max s; e_i = exp_f32(s_i - m); sum = e_0 + e_1 +
// ... in increasing i (sequential f32 adds); s_i = e_i / sum.
void softmax_row(float* s, int64_t n);
// softmax_row of each of `count` rows (rows[r] of length n[r] >= 1), the same bits per row.
void softmax_rows(float* const* rows, const int64_t* n, int count);
// The first two steps of softmax_row for each of `count` rows, in place: rows[r][i] = e_i and
// sums[r] = sum, the same bits; softmax_row is this, then s_i = e_i / sum. For callers that
// divide later, where they read the row anyway (attention divides each block of 64 keys as
// its value products take it, so a long row is not read and written once more in between).
// The max is a vector max per row (`x > m ? x : m` in every lane, the scalar comparison: the
// same value, up to the sign of a zero max, which leaves every s_i - m unchanged); the sum is
// a sequential chain per row, one add waiting for the previous one, so the chains of up to 8
// rows run interleaved over blocks of exponentials still in L1 (attention: the rows of a
// task's queries, whose lengths differ by a few keys).
void softmax_exp_rows(float* const* rows, const int64_t* n, int count, float* sums);

}  // namespace ember::ops
