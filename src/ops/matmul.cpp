// matmul and dot_f32 dispatch: validates the weight matrices, quantizes the activations once
// per call and format (ops/quantize_act.h: a scalar reference and its AVX2 twin, the same
// bits; rows split across the pool), and splits weight rows across the pool.
#include "ops/matmul.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <unistd.h>

#include "gguf/blocks.h"
#include "ops/dot.h"
#include "ops/kernels.h"
#include "ops/quantize_act.h"
#include "util/error.h"
#include "util/f16.h"

namespace ember::ops {
namespace detail {

int64_t weight_row_bytes(gguf::TensorType type, int64_t k) {
  gguf::BlockGeometry g;
  EMBER_CHECK(gguf::block_geometry(type, &g));
  return k / g.elems * g.bytes;
}

int64_t avx2_tile_l2_budget() {
  static const int64_t budget = [] {
    const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);  // glibc reads it from cpuid; 0 if unknown
    if (l2 <= 0) return int64_t{256} << 10;
    return std::clamp(int64_t(l2) / 2, int64_t{128} << 10, int64_t{1024} << 10);
  }();
  return budget;
}

}  // namespace detail

namespace {

using detail::Activations;
using detail::KernelTable;
using detail::MatmulKernel;
using gguf::TensorType;

const KernelTable& table_for(SimdLevel level) {
  if (!simd_supported(level))
    fail_field("matmul", "SIMD path", "one this CPU supports", simd_name(level));
  switch (level) {
    case SimdLevel::avx512vnni: return detail::avx512vnni_kernels();
    case SimdLevel::avx512: return detail::avx512_kernels();
    case SimdLevel::avxvnni_evex: return detail::avxvnni_evex_kernels();
    case SimdLevel::avxvnni: return detail::avxvnni_kernels();
    case SimdLevel::avx2: return detail::avx2_kernels();
    case SimdLevel::scalar: break;
  }
  return detail::scalar_kernels();
}

MatmulKernel kernel_for(const KernelTable& t, TensorType type) {
  switch (type) {
    case TensorType::F32: return t.f32;
    case TensorType::F16: return t.f16;
    case TensorType::BF16: return t.bf16;
    case TensorType::Q4_0: return t.q4_0;
    case TensorType::Q4_1: return t.q4_1;
    case TensorType::Q5_0: return t.q5_0;
    case TensorType::Q5_1: return t.q5_1;
    case TensorType::Q8_0: return t.q8_0;
    case TensorType::Q4_K: return t.q4_k;
    case TensorType::Q5_K: return t.q5_k;
    case TensorType::Q6_K: return t.q6_k;
    default: return nullptr;
  }
}

bool uses_q8k(TensorType t) {
  return t == TensorType::Q4_K || t == TensorType::Q5_K || t == TensorType::Q6_K;
}

// How the activations of a call enter the kernels of one weight type.
enum class ActFormat { f32, q8_0, q8_K };
ActFormat act_format(TensorType t) {
  if (t == TensorType::F32 || t == TensorType::F16 || t == TensorType::BF16) return ActFormat::f32;
  return uses_q8k(t) ? ActFormat::q8_K : ActFormat::q8_0;
}

// Scratch for quantized activations of one format, reused across calls (decode runs hundreds
// of matmuls per token; this avoids an allocation each time). One per calling thread.
struct Scratch {
  std::vector<int8_t> q;
  std::vector<float> d, d8, dt, dp;
  std::vector<uint8_t> u;  // 64 bytes more than the codes, so that a.u can start on a line
  std::vector<int8_t> qp;
  std::vector<int32_t> sum;
  std::vector<int16_t> bsums;
  std::vector<float> bsf;
};

// The first cache line of a byte vector sized 64 bytes more than it holds: a large vector's
// data sits 16 bytes into its mapping.
template <class Byte>
Byte* line_start(std::vector<Byte>& v) {
  static_assert(sizeof(Byte) == 1);
  return v.data() + (64 - reinterpret_cast<uintptr_t>(v.data()) % 64) % 64;
}

// Quantizes x (n, k) into s for format f and points a at it. The rows are split across the
// pool (each row's quantization is the same scalar code whichever thread runs it).
void quantize_activations(ActFormat f, const float* x, int64_t n, int64_t k, Scratch& s,
                          Activations& a, ThreadPool& pool, SimdLevel level) {
  a.n = n;
  a.k = k;
  a.f32 = x;
  if (f == ActFormat::f32) return;
  const int64_t nb = k / (f == ActFormat::q8_K ? gguf::kQKK : gguf::kQK);
  // The codes start on a cache line: else the K-quant panel's 32-byte token loads split across
  // lines every other group (2-3 % of that kernel on the Emerald Rapids VM).
  s.q.resize(size_t(n * k + 64));
  int8_t* const q = line_start(s.q);
  s.d.resize(size_t(n * nb));
  a.q = q;
  a.d = s.d.data();
  // bsf (and dp, below) is read by the K-quant panels alone (KPanel, ops/k_panel.h, on the
  // AVX2-class paths; KZmm, ops/k_zmm_panel.h, on the AVX-512 ones).
  const bool with_bsf = f == ActFormat::q8_K && n > detail::kStreamTokens &&
                        (simd_base(level) == SimdLevel::avx2 || simd_base(level) == SimdLevel::avx512);
  if (f == ActFormat::q8_K) {
    s.bsums.resize(size_t(n * (k / 16)));
    a.bsums = s.bsums.data();
    if (with_bsf) {
      s.bsf.resize(size_t(n * (k / 32)));
      a.bsf = s.bsf.data();
    }
  } else {
    s.sum.resize(size_t(n * nb));
    a.sum = s.sum.data();
  }
  // d8 (each scale 8 times) is read by the zmm kernels alone (kernels_avx512.cpp).
  const bool with_d8 = f == ActFormat::q8_0 && simd_base(level) == SimdLevel::avx512;
  if (with_d8) {
    s.d8.resize(size_t(n * nb * 8));
    a.d8 = s.d8.data();
  }
  // u and dt are read by the ymm VNNI builds' prefill panel alone (kernels_avx2.cpp, Q32Vnni),
  // never by decode or a small batch (kStreamTokens).
  const bool with_u = f == ActFormat::q8_0 && n > detail::kStreamTokens &&
                      (level == SimdLevel::avxvnni || level == SimdLevel::avxvnni_evex);
  // up (and dt) by the avx512vnni path's (Q32Zmm), likewise.
  const bool with_up = f == ActFormat::q8_0 && n > detail::kStreamTokens && level == SimdLevel::avx512vnni;
  // qp and dp by the avx2 path's (Q32Panel), likewise; dp by KPanel too.
  const bool with_qp = f == ActFormat::q8_0 && n > detail::kStreamTokens &&
                       level == SimdLevel::avx2;
  const bool with_dp = with_qp || with_bsf;
  uint8_t* u = nullptr;
  if (with_u) {
    s.u.resize(size_t(n * k + 64));
    u = line_start(s.u);
    a.u = u;
  }
  uint8_t* up = nullptr;
  if (with_up) {
    s.u.resize(size_t((n + 1) / 2 * 2 * k + 64));
    up = line_start(s.u);
    a.up = up;
  }
  if (with_u || with_up) {
    s.dt.assign(size_t((n + 7) / 8 * 8 * nb + 8), 0.0f);
    a.dt = s.dt.data();
  }
  if (with_qp) {
    s.qp.resize(size_t(n * k));
    a.qp = s.qp.data();
  }
  if (with_dp) {
    s.dp.resize(size_t(2 * n * nb));
    a.dp = s.dp.data();
  }
  // Rows in chunks of at least 8 so a short call is not split into sections smaller than
  // their hand-off.
  constexpr int64_t kRows = 8;
  pool.parallel_for((n + kRows - 1) / kRows, [&](int64_t c0, int64_t c1) {
    const int64_t t0 = c0 * kRows, t1 = std::min(n, c1 * kRows), nt = t1 - t0;
    if (f == ActFormat::q8_K) {
      detail::quantize_q8_k_rows(x + t0 * k, nt, k, q + t0 * k, s.d.data() + t0 * nb,
                                 s.bsums.data() + t0 * (k / 16), level);
      if (with_bsf) {
        const int16_t* const bs = s.bsums.data();
        float* const out = s.bsf.data();
        for (int64_t j = t0 * (k / 32); j < t1 * (k / 32); ++j)
          out[j] = float(int32_t(bs[2 * j]) + bs[2 * j + 1]);
      }
    } else {
      detail::quantize_q8_0_rows(x + t0 * k, nt, k, q + t0 * k, s.d.data() + t0 * nb,
                                 s.sum.data() + t0 * nb, level);
      if (with_d8)
        for (int64_t i = t0 * nb; i < t1 * nb; ++i)
          for (int l = 0; l < 8; ++l) s.d8[size_t(8 * i + l)] = s.d[size_t(i)];
      if (with_u) {
        // Through local copies of every pointer and bound: a byte store may alias anything
        // the closure reaches, and reloading them for every byte made this loop 1.8 % of a
        // prefill.
        const int8_t* const qs = q;
        uint8_t* const uo = u;
        const int64_t j0 = t0 * k, j1 = t1 * k;
        for (int64_t j = j0; j < j1; ++j) uo[j] = uint8_t(qs[j] ^ 0x80);
      }
      if (with_up) {
        // Token pairs interleaved 4 bytes at a time (ops/kernels.h); t0 and t1 are even or n.
        const int8_t* const qs = q;
        uint8_t* const uo = up;
        for (int64_t t = t0; t < t1; t += 2) {
          const int8_t* const q0 = qs + t * k;
          const int8_t* const q1 = qs + (t + 1 < n ? t + 1 : t) * k;
          uint8_t* const o = uo + t * k;
          for (int64_t j = 0; j < k; j += 4) {
            uint32_t w0, w1;
            std::memcpy(&w0, q0 + j, 4);
            std::memcpy(&w1, q1 + j, 4);
            w0 ^= 0x80808080u, w1 ^= 0x80808080u;
            std::memcpy(o + 2 * j, &w0, 4);
            std::memcpy(o + 2 * j + 4, &w1, 4);
          }
        }
      }
      if (with_u || with_up) {
        const float* const d = s.d.data();
        float* const dt = s.dt.data();
        for (int64_t t = t0; t < t1; ++t)
          for (int64_t b = 0; b < nb; ++b) dt[Activations::dt_index(t, b, nb)] = d[t * nb + b];
      }
      if (with_qp) {
        // Pair order (ops/kernels.h): element pairs (4i, 4i + 1) first, then (4i + 2, 4i + 3).
        const int8_t* const qs = q;
        int8_t* const po = s.qp.data();
        const int64_t j0 = t0 * k, j1 = t1 * k;
        for (int64_t j = j0; j < j1; j += 32)
          for (int i = 0; i < 8; ++i) {
            po[j + 2 * i] = qs[j + 4 * i], po[j + 2 * i + 1] = qs[j + 4 * i + 1];
            po[j + 16 + 2 * i] = qs[j + 4 * i + 2], po[j + 16 + 2 * i + 1] = qs[j + 4 * i + 3];
          }
      }
    }
  });
  // dp pairs each token's scales with the next token's, which another thread may quantize:
  // a second section, once all of d is there.
  if (with_dp)
    pool.parallel_for((n + kRows - 1) / kRows, [&](int64_t c0, int64_t c1) {
      const float* const d = s.d.data();
      float* const dp = s.dp.data();
      for (int64_t t = c0 * kRows, t1 = std::min(n, c1 * kRows); t < t1; ++t) {
        const float* const d0 = d + t * nb;
        const float* const d1 = d + (t + 1 < n ? t + 1 : t) * nb;
        float* const out = dp + 2 * t * nb;
        for (int64_t b = 0; b < nb; ++b) out[2 * b] = d0[b], out[2 * b + 1] = d1[b];
      }
    });
}

void check_matrix(const WeightMatrix& W, int64_t k) {
  gguf::BlockGeometry g;
  if (!gguf::block_geometry(W.type, &g))
    fail_field("matmul", "weight type",
               "one of f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q4_K, q5_K, q6_K",
               gguf::type_name(uint32_t(W.type)));
  if (W.rows < 0 || W.cols <= 0 || W.cols % g.elems != 0)
    fail_field("matmul", "weight shape", "rows >= 0 and cols a positive multiple of " +
               std::to_string(g.elems) + " for " + gguf::type_name(uint32_t(W.type)),
               std::to_string(W.rows) + " x " + std::to_string(W.cols));
  if (W.cols != k)
    fail_field("matmul", "weight shape", "cols " + std::to_string(k) +
               " (the same input width for every matrix of one call)", std::to_string(W.cols));
}

}  // namespace

bool matmul_supports(TensorType type) {
  gguf::BlockGeometry g;
  return gguf::block_geometry(type, &g);
}

void matmul(const WeightMatrix& W, const float* x, int64_t n, float* y, ThreadPool& pool) {
  matmul(W, x, n, y, pool, active_simd());
}

void matmul(const WeightMatrix& W, const float* x, int64_t n, float* y, ThreadPool& pool,
            SimdLevel level) {
  matmul_shared(std::span<const WeightMatrix>(&W, 1), x, n, std::span<float* const>(&y, 1),
                pool, level);
}

void matmul_shared(std::span<const WeightMatrix> Ws, const float* x, int64_t n,
                   std::span<float* const> ys, ThreadPool& pool) {
  matmul_shared(Ws, x, n, ys, pool, active_simd());
}

void matmul_shared(std::span<const WeightMatrix> Ws, const float* x, int64_t n,
                   std::span<float* const> ys, ThreadPool& pool, SimdLevel level) {
  constexpr size_t kMax = 8;
  EMBER_CHECK(Ws.size() == ys.size() && Ws.size() <= kMax);
  if (Ws.empty()) return;
  for (const WeightMatrix& W : Ws) check_matrix(W, Ws[0].cols);
  if (n <= 0) return;
  const KernelTable& table = table_for(level);
  const int64_t k = Ws[0].cols;

  // Each activation format the matrices need, quantized once.
  thread_local Scratch scratch[3];
  Activations acts[3];
  bool have[3] = {false, false, false};
  MatmulKernel kernels[kMax];
  // Rows go to threads in groups of 16 so the SIMD kernels' row blocking stays whole; the
  // groups of all matrices form one range, split in one parallel section. Which thread
  // computes a row never changes its bits.
  constexpr int64_t kGroup = 16;
  int64_t first_group[kMax + 1];
  first_group[0] = 0;
  for (size_t i = 0; i < Ws.size(); ++i) {
    kernels[i] = kernel_for(table, Ws[i].type);
    EMBER_CHECK(kernels[i] != nullptr);
    const int f = int(act_format(Ws[i].type));
    if (!have[f]) {
      quantize_activations(ActFormat(f), x, n, k, scratch[f], acts[f], pool, level);
      have[f] = true;
    }
    first_group[i + 1] = first_group[i] + (Ws[i].rows + kGroup - 1) / kGroup;
  }
  auto rows_of_groups = [&](int64_t g0, int64_t g1) {
    for (size_t i = 0; i < Ws.size(); ++i) {
      const int64_t b = std::max(g0, first_group[i]), e = std::min(g1, first_group[i + 1]);
      if (b >= e) continue;
      const WeightMatrix& W = Ws[i];
      kernels[i](W, acts[int(act_format(W.type))], (b - first_group[i]) * kGroup,
                 std::min(W.rows, (e - first_group[i]) * kGroup), ys[i]);
    }
  };
  const int64_t groups = first_group[Ws.size()];
  // A static split waits for its slowest thread, so the groups go in chunks to whichever
  // thread is free: about 16 chunks per thread in a prefill (sections of milliseconds), 4 in a
  // decode step (tens of microseconds each, where every chunk restarts the row walk's
  // prefetch; Qwen2.5-0.5B and Llama-3.2-1B Q8_0 tg at 2 threads, 4 chunks per thread against
  // one static share: +0 to 6 % in 6 alternating pairs).
  const int64_t per_thread = n > detail::kStreamTokens ? 16 : 4;
  pool.parallel_chunks(groups, std::max<int64_t>(1, groups / (per_thread * pool.size())),
                       rows_of_groups);
}

float dot_f32(const float* a, const float* b, int64_t k) {
  return dot_f32(a, b, k, active_simd());
}

float dot_f32(const float* a, const float* b, int64_t k, SimdLevel level) {
  return table_for(level).dot_f32(a, b, k);
}

void dot_f32_rows(const float* a, const float* b, int64_t rows, int64_t k, float scale, float* out) {
  const detail::DotKernel dot = table_for(active_simd()).dot_f32;
  for (int64_t r = 0; r < rows; ++r) out[r] = dot(a, b + r * k, k) * scale;
}

}  // namespace ember::ops
