#pragma once
// Small vector kernels used by the engine outside matmul. Each is elementwise (no reduction),
// so the vector twins are bit-identical to the scalar loops by construction: every lane does
// the scalar operation (explicit FMA where the scalar code writes std::fma).
#include <cstdint>

namespace ember::ops {

// y[i] = fma(a, x[i], y[i]).  x (n,), y (n,)
void axpy_f32(float a, const float* x, float* y, int64_t n);
// For r = 0, 1, ..., rows-1 in that order: y[i] = fma(w[r], x[r * n + i], y[i]); the same
// bits as rows calls of axpy_f32 (each element's chain is in r order), with y held in
// registers across the rows.  w (rows,), x (rows, n), y (n,)
void axpy_rows_f32(const float* w, const float* x, int64_t rows, int64_t n, float* y);
// axpy_rows_f32(w[k], x, rows, n, y[k]) for each k < count, the same bits, with each row of
// x read once for several outputs (attention: a task's queries against a block of value rows).
//   w[k] (rows,), x (rows, n), y[k] (n,)
void axpy_rows_f32_shared(const float* const* w, const float* x, int64_t rows, int64_t n,
                          float* const* y, int count);
// out[i * out_ld + c] = dot_f32(query i, key c, n) * scale for queries i in [0, nq) (query i
// at q + i * n) and keys c in [0, keys), bit for bit (ops/dot.h: element j in lane j % 16,
// fma in increasing j, the fixed tree), with the keys given transposed: element j of key c at
// kt[j * ld + c] (ld >= keys). Several keys are computed side by side, key c in vector lane
// c, each lane carrying the 16 canonical accumulators of its own key, so there is no
// horizontal reduction per key; queries are taken up to four at a time, so each key load
// serves several (attention scores of a tile of queries against a block of keys).
//   q (nq, n), kt (n, ld), out (nq, out_ld)
void dot_f32_keys(const float* q, int64_t nq, const float* kt, int64_t keys, int64_t n,
                  int64_t ld, float scale, float* out, int64_t out_ld);
// dst[i] = f16 -> f32 (exact).  src (n,) f16 bit patterns -> dst (n,)
void f16_to_f32_row(const uint16_t* src, float* dst, int64_t n);
// dst[j * ld + r] = f16 -> f32 of src[r * n + j] (exact) for rows r < rows, columns j < n:
// a block of f16 rows converted and transposed in one pass (the key block dot_f32_keys
// reads).  src (rows, n) f16 bit patterns -> dst (n, ld), ld >= rows
void f16_rows_to_f32_columns(const uint16_t* src, int64_t rows, int64_t n, float* dst, int64_t ld);
// dst[i] = f32 -> f16, round to nearest even (util/f16.h).  src (n,) -> dst (n,)
void f32_to_f16_row(const float* src, uint16_t* dst, int64_t n);
// out[i] = f16 -> f32 of (f32 -> f16 of x[i] / d): a quotient rounded to f16 and back (the
// attention probabilities e_j / sum as its value products take them, docs/numerics.md step 8).
//   x (n,) -> out (n,); out may alias x
void divide_round_f16_row(const float* x, float d, int64_t n, float* out);

}  // namespace ember::ops
