#pragma once
// Internal to ops/: the matmul kernels of one SIMD path and the quantized activations they
// read. kernels_scalar.cpp holds the reference definitions; kernels_avx2.cpp and
// kernels_avx512.cpp are their twins and must produce the same bits (tests/ops).
#include <cstdint>

#include "ops/matmul.h"

namespace ember::ops::detail {

// The activation rows x (n,k) as the kernels of one weight type read them.
//   f32 weights:  f32 = x.
//   32-blocks (Q4_0/Q4_1/Q5_0/Q5_1/Q8_0): per token t and block b (nb = k/32):
//     q[t*k + e] int8 in [-127, 127], d[t*nb + b] = the f16-rounded scale as f32,
//     sum[t*nb + b] = sum of the block's q (used by Q4_1 / Q5_1).
//   256-blocks (Q4_K/Q5_K/Q6_K): q as above, d[t*nb + b] f32 scale (nb = k/256),
//     bsums[t*(k/16) + i] = sum of q over elements [16i, 16i + 16).
struct Activations {
  int64_t n = 0, k = 0;
  const float* f32 = nullptr;
  const int8_t* q = nullptr;
  const float* d = nullptr;
  const float* d8 = nullptr;  // 32-blocks on zmm paths only: d8[t*nb*8 + 8b + l] = d[t*nb + b]
  // 32-blocks on the ymm VNNI paths only, and only for prefill (n > kStreamTokens, the calls
  // that reach the panel Q32Vnni; null otherwise): the codes as vpdpbusd's unsigned operand,
  // u[t*k + j] = q[t*k + j] + 128 (64-byte aligned rows when k % 64 == 0), and the scales
  // in groups of 8 tokens, block by block within a group (dt_at below; a last group's
  // missing tokens are 0).
  const uint8_t* u = nullptr;
  // 32-blocks on the avx512vnni path only, and only for prefill (the panel Q32Zmm): the
  // tokens in pairs, interleaved 4 bytes at a time: for token pair p (tokens 2p and 2p + 1, a
  // last odd token paired with itself) and block b, the 64 bytes at up[(p*nb + b)*64] hold
  // u = q + 128 of elements 4l..4l+3 of token 2p, then the same of token 2p + 1, l = 0..7.
  // dt as above (also made for this path).
  const uint8_t* up = nullptr;
  const float* dt = nullptr;
  // Token t's scale of block b in dt: the 8 tokens of t's group side by side, so that a
  // tile's table of scale products reads one block after another. Block-major (b*n + t), each
  // block's load came from another line of L2: the table loop of Q32Zmm was a quarter of its
  // tile's samples (perf, Llama-3.2-1B Q8_0 pp512, avx512vnni, Zen 5).
  static int64_t dt_index(int64_t t, int64_t b, int64_t nb) { return (t / 8) * 8 * nb + 8 * b + t % 8; }
  const float* dt_at(int64_t t, int64_t b) const { return dt + dt_index(t, b, k / 32); }
  // 32-blocks on the avx2 path only, and only for prefill (the panel Q32Panel): each block's
  // codes in pair order, bytes 0-15 = elements 4i, 4i + 1 (i = 0..7), bytes 16-31 = elements
  // 4i + 2, 4i + 3; and the scales of tokens t and t + 1 side by side, dp[2 (t*nb + b) + j] =
  // d[(t + j)*nb + b] (j = 0, 1; the last token's second is its own). dp also for 256-blocks
  // on the AVX2-class and AVX-512 paths (prefill, the K-quant panels KPanel and KZmm).
  const int8_t* qp = nullptr;
  const float* dp = nullptr;
  const int32_t* sum = nullptr;
  const int16_t* bsums = nullptr;
  // 256-blocks on the AVX2-class and AVX-512 paths, only for prefill (KPanel, KZmm):
  // the sums of each 32 codes as floats, bsf[t*(k/32) + j] = bsums[t*(k/16) + 2j] +
  // bsums[t*(k/16) + 2j + 1] (exact: at most 32 * 128 in magnitude).
  const float* bsf = nullptr;
};

// Computes y[t*m + i] for rows i in [r0, r1) and all n tokens. m = W.rows.
using MatmulKernel = void (*)(const WeightMatrix& W, const Activations& a, int64_t r0,
                              int64_t r1, float* y);
using DotKernel = float (*)(const float* a, const float* b, int64_t k);

struct KernelTable {
  DotKernel dot_f32;
  MatmulKernel f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q4_k, q5_k, q6_k;
};

const KernelTable& scalar_kernels();
const KernelTable& avx2_kernels();    // only call where the CPU supports AVX2+FMA+F16C
// The AVX2 kernel source again with vpdpbusd on ymm for the 32-block int8 dot products
// (kernels_avxvnni.cpp): the VEX encoding (AVX-VNNI), and the EVEX encoding of the same
// operations (AVX512-VNNI + AVX512VL), the validation twin of util/simd.h.
const KernelTable& avxvnni_kernels();       // only where the CPU supports AVX-VNNI (and AVX2)
const KernelTable& avxvnni_evex_kernels();  // only where it supports AVX512 F/VL/VNNI (and AVX2)
const KernelTable& avx512_kernels();  // only call where the CPU supports AVX-512 F/BW/VL/DQ
const KernelTable& avx512vnni_kernels();  // ... and AVX512_VNNI (the same source, see below)

// Bytes of activations a token chunk of the AVX2 kernels keeps in L2 (tile_driver.h): half
// the core's L2, at least 128 KiB and at most 1 MiB, the largest value measured; 256 KiB
// where the size is unknown. bench_matmul 1 avx2 512 q8_0 on the Zen 4 VM (1 MiB of L2), GOP/s,
// 256 -> 512 KiB: 84-86 -> 91-92 at k = 8192 (Llama-3.2-1B's ffn_down), 96-98 -> 102 at
// k = 2048, the same at k = 896 and 4864; q4_K / q6_K at k = 8192 87-106 / 72-74 -> 105-110 /
// 77-78. On the Emerald Rapids VM (2 MiB of L2), best of 7 ops::matmul runs, 512 -> 1024 KiB:
// q8_0 at k = 8192 67-68 -> 69-71 (a panel is filled once per chunk), the same at k = 896 to
// 4864 and for q4_K. Measured once per process.
int64_t avx2_tile_l2_budget();

// Batches of up to this many tokens take the decode walk (tile_driver.h: two row streams,
// each row read from memory once for all the tokens) and its prefetch (prefetch.h); larger
// ones are prefill, whose tiles reread rows from the caches, through the row panels where a
// kernel has them (and only there are a.u, a.dt, a.qp, a.dp and a.bsf read: matmul.cpp makes
// them for prefill).
inline constexpr int64_t kStreamTokens = 8;

// Bytes of one weight row of k elements (k a multiple of the block size).
int64_t weight_row_bytes(gguf::TensorType type, int64_t k);

}  // namespace ember::ops::detail
