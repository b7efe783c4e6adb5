// Dequantization throughput per tensor type, as ratios to memcpy measured in the same run:
//   vs src: memcpy of the same (quantized) bytes, i.e. how close dequantization comes to
//           just reading the tensor;
//   vs dst: memcpy of the f32 bytes it produces (same volume of writes).
// Usage: bench_dequant [elements=1048576]. Median of many repetitions; the buffers stay in
// the last-level cache, so this measures the decoding work, not DRAM.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "bench_limits.h"
#include "gguf/blocks.h"
#include "gguf/dequantize.h"
#include "gguf/quantize.h"
#include "gguf/types.h"
#include "util/f16.h"

using namespace ember;

int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : (int64_t(1) << 20);
  if (n <= 0 || n % 256 != 0) {
    std::fprintf(stderr, "bench_dequant: elements must be a positive multiple of 256\n");
    return 2;
  }
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
  for (auto& v : x) v = nd(rng);
  const int reps = 41;
  std::printf("dequant bench: %lld elements, median of %d runs\n", (long long)n, reps);
  std::printf("%-6s %10s %10s %12s %12s\n", "type", "src MB", "GB/s out", "vs memcpy src",
              "vs memcpy dst");
  for (gguf::TensorType t : {gguf::TensorType::F32, gguf::TensorType::F16, gguf::TensorType::BF16,
                             gguf::TensorType::Q8_0, gguf::TensorType::Q4_0, gguf::TensorType::Q4_1,
                             gguf::TensorType::Q5_0, gguf::TensorType::Q5_1, gguf::TensorType::Q4_K,
                             gguf::TensorType::Q5_K, gguf::TensorType::Q6_K}) {
    std::vector<uint8_t> src(gguf::row_bytes(t, uint64_t(n)));
    if (t == gguf::TensorType::F32) {
      std::memcpy(src.data(), x.data(), src.size());
    } else if (t == gguf::TensorType::F16 || t == gguf::TensorType::BF16) {
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = t == gguf::TensorType::F16 ? f32_to_f16(x[size_t(i)]) : f32_to_bf16(x[size_t(i)]);
        std::memcpy(src.data() + 2 * i, &h, 2);
      }
    } else if (gguf::can_quantize_to(t)) {
      gguf::quantize_row(t, x.data(), src.data(), n);
    } else {  // random codes, moderate f16 scales
      std::uniform_int_distribution<int> byte(0, 255);
      for (auto& b : src) b = uint8_t(byte(rng));
      const size_t bb = gguf::traits(t).block_bytes;
      const uint16_t d = f32_to_f16(0.01f);
      for (size_t off = 0; off < src.size(); off += bb) std::memcpy(src.data() + off, &d, 2);
    }
    std::vector<uint8_t> copy(src.size()), ybytes(size_t(n) * 4);
    const double t_deq = bench::median_time(reps, [&] { gguf::dequantize_row(t, src.data(), y.data(), n); });
    const double t_src = bench::median_time(reps, [&] { std::memcpy(copy.data(), src.data(), src.size()); });
    const double t_dst = bench::median_time(reps, [&] { std::memcpy(ybytes.data(), y.data(), ybytes.size()); });
    std::printf("%-6s %10.2f %10.2f %12.3f %12.3f\n", gguf::type_name(uint32_t(t)).c_str(),
                double(src.size()) / 1e6, double(n) * 4 / t_deq / 1e9, t_src / t_deq, t_dst / t_deq);
  }
  return 0;
}
