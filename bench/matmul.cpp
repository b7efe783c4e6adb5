// matmul throughput per weight type at a Qwen2.5-0.5B-like shape (k = 896, m = 4864):
//   n = 1 (decode): weight bytes read per second over the measured memory-read bandwidth;
//   n = 64 (prefill): FLOP/s (2 m k n) over the measured peak FMA rate of the same path and
//   thread count.
// Usage: bench_matmul [threads=1] [simd=active] [n [type,...]]. The weights are replicated
// beyond the caches for n = 1 so the decode figure measures memory, not L3. With n given, only
// the prefill figure at n tokens is measured (median of 7), for the listed types (default all):
// `bench_matmul 1 avx512vnni 512 q8_0,q4_K` compares kernels without the decode set-up; at one
// thread that figure is timed in process CPU time, which a loaded machine's neighbours steal
// less of than wall time.
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "gguf/quantize.h"
#include "gguf/types.h"
#include "bench_limits.h"
#include "ops/matmul.h"
#include "util/f16.h"

using namespace ember;

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  const SimdLevel level = argc > 2 ? parse_simd(argv[2]) : active_simd();
  const int64_t n_pre = argc > 3 ? std::atoll(argv[3]) : 0;  // 0: the default n = 1 and n = 64
  if (n_pre < 0 || n_pre > 65536) {
    std::fprintf(stderr, "bench_matmul: n: expected 0..65536 tokens, found %s\n", argv[3]);
    return 2;
  }
  const std::string only = argc > 4 ? "," + std::string(argv[4]) + "," : "";
  // Qwen2.5-0.5B's ffn_up/gate shape; K quants need k % 256 == 0, so they (like that model's
  // real Q4_K tensors) are measured on the ffn_down shape, k = 4864, m = 896: same bytes.
  // An optional fifth argument "K,M" measures another shape (the 32-block types at k = K,
  // m = M; the K quants at k = M, m = K, so K quants need M % 256 == 0).
  int64_t k0 = 896, m0 = 4864;
  if (argc > 5 && (std::sscanf(argv[5], "%lld,%lld", reinterpret_cast<long long*>(&k0),
                               reinterpret_cast<long long*>(&m0)) != 2 ||
                   k0 <= 0 || m0 <= 0 || k0 % 32 != 0 || k0 > 65536 || m0 > 65536)) {
    std::fprintf(stderr, "bench_matmul: shape: expected K,M (K a multiple of 32), found %s\n", argv[5]);
    return 2;
  }
  ThreadPool pool(threads);
  std::printf("matmul bench: k=%lld m=%lld (K quants: k=%lld m=%lld) threads=%d simd=%s\n",
              (long long)k0, (long long)m0, (long long)m0, (long long)k0, threads, simd_name(level));
  const int64_t n = n_pre > 0 ? n_pre : 64;
  const double bw = n_pre > 0 ? 0.0 : bench::read_bandwidth(pool);
  const double peak = bench::fma_peak(pool, level == SimdLevel::scalar ? SimdLevel::avx2 : level);
  const double ipeak = bench::int8_mac_peak(pool, level == SimdLevel::scalar ? SimdLevel::avx2 : level);
  std::printf("limits: read bandwidth %.2f GB/s, FMA peak %.1f GFLOP/s (%s), int8 MAC peak %.1f GOP/s\n",
              bw / 1e9, peak / 1e9, simd_base(level) == SimdLevel::avx512 ? "zmm" : "ymm", ipeak / 1e9);

  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  std::vector<float> wf(size_t(m0 * k0));
  for (auto& v : wf) v = nd(rng);
  std::vector<float> x(size_t(n * m0));
  for (auto& v : x) v = nd(rng) * 20;

  std::printf("%-6s %12s %10s %11s%-5lld %10s\n", "type", "n=1 GB/s", "/bw", "GFLOP/s n=", (long long)n,
              "/peak");
  for (gguf::TensorType type : {gguf::TensorType::F32, gguf::TensorType::F16, gguf::TensorType::BF16,
                                gguf::TensorType::Q8_0, gguf::TensorType::Q4_0, gguf::TensorType::Q4_1,
                                gguf::TensorType::Q5_0, gguf::TensorType::Q5_1, gguf::TensorType::Q4_K,
                                gguf::TensorType::Q5_K, gguf::TensorType::Q6_K}) {
    if (!only.empty() && only.find("," + gguf::type_name(uint32_t(type)) + ",") == std::string::npos)
      continue;
    const bool kq = gguf::traits(type).block_elems == 256;
    const int64_t k = kq ? m0 : k0, m = kq ? k0 : m0;
    const uint64_t rb = gguf::row_bytes(type, uint64_t(k));
    std::vector<uint8_t> w(size_t(rb * m));
    if (type == gguf::TensorType::F32) {
      std::memcpy(w.data(), wf.data(), w.size());
    } else if (type == gguf::TensorType::F16 || type == gguf::TensorType::BF16) {
      for (size_t i = 0; i < wf.size(); ++i) {
        const uint16_t h = type == gguf::TensorType::F16 ? f32_to_f16(wf[i]) : f32_to_bf16(wf[i]);
        std::memcpy(w.data() + 2 * i, &h, 2);
      }
    } else if (gguf::can_quantize_to(type)) {
      for (int64_t i = 0; i < m; ++i) gguf::quantize_row(type, wf.data() + i * k, w.data() + i * rb, k);
    } else {  // no quantizer: random codes with moderate f16 scales in every block
      std::uniform_int_distribution<int> byte(0, 255);
      for (auto& b : w) b = uint8_t(byte(rng));
      const int be = int(gguf::traits(type).block_elems), bb = int(gguf::traits(type).block_bytes);
      const uint16_t d = f32_to_f16(0.001f);
      for (size_t off = 0; off < w.size(); off += size_t(bb)) {
        std::memcpy(w.data() + off, &d, 2);
        if (type != gguf::TensorType::Q5_0) std::memcpy(w.data() + off + 2, &d, 2);
      }
      (void)be;
    }
    std::vector<float> y(size_t(n * m));
    double gbs = 0;
    if (n_pre == 0) {
      // Decode: rotate through enough copies to exceed the caches (>= 256 MiB).
      const size_t copies = std::max<size_t>(1, (size_t(256) << 20) / w.size() + 1);
      std::vector<uint8_t> big(w.size() * copies);
      for (size_t c = 0; c < copies; ++c) std::memcpy(big.data() + c * w.size(), w.data(), w.size());
      size_t c = 0;
      const int reps1 = int(copies) * 2;
      const double t1 = bench::median_time(reps1, [&] {
        ops::WeightMatrix W{type, big.data() + (c++ % copies) * w.size(), m, k};
        ops::matmul(W, x.data(), 1, y.data(), pool, level);
      });
      gbs = double(w.size()) / t1;
    }
    ops::WeightMatrix W{type, w.data(), m, k};
    const double tn = bench::median_time(level == SimdLevel::scalar ? 1 : (n_pre > 0 ? 7 : 5),
                                         [&] { ops::matmul(W, x.data(), n, y.data(), pool, level); },
                                         n_pre > 0 && threads == 1 ? bench::cpu_now_s : bench::now_s);
    const double flops = 2.0 * double(m) * double(k) * double(n) / tn;
    const bool quant = gguf::traits(type).block_elems > 1;
    std::printf("%-6s %12.2f %10.3f %16.1f %10.3f%s\n", gguf::type_name(uint32_t(type)).c_str(),
                gbs / 1e9, bw > 0 ? gbs / bw : 0.0, flops / 1e9, flops / (quant ? ipeak : peak),
                quant ? " (int8)" : "");
  }
  return 0;
}
