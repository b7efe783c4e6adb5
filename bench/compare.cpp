// kv compare throughput: MB of K/V (both sides, K and V) per second through compare_caches,
// as a ratio to reading the same bytes (a plain sum over 64-bit words) in the same run.
//
//   bench_compare [layers kv_heads head_dim positions]   (default 16 8 128 512: 64 MiB in all)
//
// The compare path is scalar f64 by contract (results may not depend on SIMD), so the ratio
// says how far the exact instrument is from the memory-bandwidth limit.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "bench_limits.h"
#include "analysis/compare_metrics.h"
#include "util/f16.h"
#include "util/thread_pool.h"

namespace {

using ember::bench::best_time;

void fill(ember::model::KvCache& c, uint32_t seed) {
  uint32_t x = seed;
  for (auto* arr : {&c.k, &c.v}) {
    for (uint16_t& h : *arr) {
      x = x * 1664525u + 1013904223u;
      h = ember::f32_to_f16((float((x >> 8) % 8192u) - 4096.0f) / 1024.0f);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  int dims[4] = {16, 8, 128, 512};
  if (argc == 5) {
    for (int i = 0; i < 4; ++i) dims[i] = std::atoi(argv[i + 1]);
  }
  ember::model::KvCache a(dims[0], dims[1], dims[2], dims[3]), b(dims[0], dims[1], dims[2], dims[3]);
  a.n_pos = b.n_pos = dims[3];
  fill(a, 1);
  fill(b, 2);
  const double mb = double(a.k.size() + a.v.size() + b.k.size() + b.v.size()) * 2.0 / 1e6;

  volatile uint64_t sink = 0;
  const double t_read = best_time(5, [&] {
    uint64_t s = 0;
    for (const auto* arr : {&a.k, &a.v, &b.k, &b.v}) {
      const size_t words = arr->size() / 4;
      const uint8_t* p = reinterpret_cast<const uint8_t*>(arr->data());
      for (size_t i = 0; i < words; ++i) {
        uint64_t w;
        std::memcpy(&w, p + i * 8, 8);
        s += w;
      }
    }
    sink = sink + s;
  });
  const double t_cmp = best_time(3, [&] { (void)ember::analysis::compare_caches(a, b, false); });
  const double t_r2 = best_time(3, [&] { (void)ember::analysis::compare_caches(a, b, true); });
  const int threads = int(std::max(1u, std::thread::hardware_concurrency()));
  ember::ThreadPool pool(threads);
  const double t_par = best_time(3, [&] { (void)ember::analysis::compare_caches(a, b, false, &pool); });

  std::printf("geometry %d layers x %d kv heads x %d dim x %d positions: %.1f MB of K/V\n",
              dims[0], dims[1], dims[2], dims[3], mb);
  std::printf("read (sum of 64-bit words), 1 thread: %8.1f MB/s (limit)\n", mb / t_read);
  std::printf("compare, 1 thread:                    %8.1f MB/s  ratio %.3f\n", mb / t_cmp,
              t_read / t_cmp);
  std::printf("compare --r2, 1 thread:               %8.1f MB/s  ratio %.3f\n", mb / t_r2,
              t_read / t_r2);
  std::printf("compare, %2d threads:                  %8.1f MB/s  ratio %.3f (vs 1-thread read)\n",
              threads, mb / t_par, t_read / t_par);
  return 0;
}
