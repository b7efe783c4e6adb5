#pragma once
// Matrix times activations for every weight type ember reads, under the numerics contract
// "canonical-v1" (docs/numerics.md):
//
//   matmul: W (m,k) @ x (n,k) -> y (n,m),   y[t][i] = dot(W row i, x[t])
//
// Each output element is computed by one thread, with a reduction order fixed by k and the
// weight type alone, so y is bit-identical for any n (prefill of many tokens or decode of
// one), any thread count, and every SIMD path (scalar, AVX2, AVX-512).
//
// - F32 / F16 / BF16 weights: activations stay f32, weights convert exactly to f32, and each
//   output is dot_f32 (ops/dot.h) of the weight row and the activation row.
// - Quantized weights: each activation row is first quantized to 8-bit blocks (once per call):
//   Q8_0-style 32-blocks for Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 weights, Q8_K-style 256-blocks
//   for Q4_K / Q5_K / Q6_K weights. Integer dot products per block are exact; the float
//   combination order is fixed (docs/numerics.md, section "matmul").
#include <cstdint>
#include <span>

#include "gguf/types.h"
#include "util/simd.h"
#include "util/thread_pool.h"

namespace ember::ops {

// A weight matrix in GGML order: each of the `rows` (m) rows is `cols` (k) contiguous elements
// in the block format of `type`; row i starts at data + i * row_bytes. The caller keeps data
// alive for the duration of the call.
struct WeightMatrix {
  gguf::TensorType type;
  const uint8_t* data;
  int64_t rows;  // m
  int64_t cols;  // k
};

// Whether matmul handles this weight type.
bool matmul_supports(gguf::TensorType type);

// y (n,m) = x (n,k) @ W^T, on the path active_simd() chooses. Error (naming the type) for an
// unsupported type or a k that is not a multiple of the type's block size. x and y must not
// overlap. n == 0 does nothing.
void matmul(const WeightMatrix& W, const float* x, int64_t n, float* y, ThreadPool& pool);
// The same on a given path (tests, benchmarks); level must be supported by the CPU.
void matmul(const WeightMatrix& W, const float* x, int64_t n, float* y, ThreadPool& pool,
            SimdLevel level);

// Several matrices of one input width k applied to the same x: ys[i] (n, Ws[i].rows) =
// x @ Ws[i]^T (Q/K/V; gate/up). The bits of each ys[i] are those of matmul(Ws[i], x, ...);
// the activations are quantized once per format instead of once per matrix, and all the
// matrices' rows are split in one parallel section. At most 8 matrices; an error (naming
// the shape) if their widths differ.
void matmul_shared(std::span<const WeightMatrix> Ws, const float* x, int64_t n,
                   std::span<float* const> ys, ThreadPool& pool);
void matmul_shared(std::span<const WeightMatrix> Ws, const float* x, int64_t n,
                   std::span<float* const> ys, ThreadPool& pool, SimdLevel level);

}  // namespace ember::ops
