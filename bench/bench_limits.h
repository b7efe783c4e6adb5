#pragma once
// Physical limits measured in the same run as a benchmark, so that results are reported as
// ratios (bench/README.md): memory-read bandwidth and peak FMA rate of the active SIMD path.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <vector>

#include "util/simd.h"
#include "util/thread_pool.h"

namespace ember::bench {

// Wall-clock time, in seconds.
inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Process CPU time, in seconds: for single-threaded work on a shared machine, where a
// neighbour steals wall time but not CPU time (both sides of a ratio must use the same clock).
inline double cpu_now_s() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

// Median of `reps` timings of fn(), in seconds of `clock` (wall time unless told).
template <class F>
double median_time(int reps, F&& fn, double (*clock)() = now_s) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const double t0 = clock();
    fn();
    t.push_back(clock() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Fastest of `reps` timings of fn(), in seconds: for the physical limits, which are the best
// the machine does (a shared VM loses a run now and then to its neighbours).
template <class F>
double best_time(int reps, F&& fn) {
  double best = 0;
  for (int i = 0; i < reps; ++i) {
    const double t0 = now_s();
    fn();
    const double t = now_s() - t0;
    if (i == 0 || t < best) best = t;
  }
  return best;
}

// Sums n words as 8 concurrent streams (n / 8 words apart), so the core keeps as many
// misses in flight as a matmul over several weight rows does.
__attribute__((target("avx2"))) inline uint64_t sum_avx2(const uint64_t* p, size_t n) {
  constexpr int kStreams = 8;
  const size_t len = n / kStreams / 4 * 4;
  __m256i s[kStreams];
  for (int j = 0; j < kStreams; ++j) s[j] = _mm256_setzero_si256();
  for (size_t i = 0; i < len; i += 4)
    for (int j = 0; j < kStreams; ++j)
      s[j] = _mm256_add_epi64(
          s[j], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + size_t(j) * len + i)));
  uint64_t out[4], r = 0;
  for (int j = 0; j < kStreams; ++j) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), s[j]);
    r += out[0] + out[1] + out[2] + out[3];
  }
  return r;
}

// Bytes per second for reading `bytes` of memory (far larger than the caches) with wide
// loads into independent accumulators, split across the pool's threads.
inline double read_bandwidth(ThreadPool& pool, size_t bytes = size_t(512) << 20, int reps = 7) {
  std::vector<uint64_t> buf(bytes / 8);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = i * 0x9E3779B97F4A7C15ull;
  std::vector<uint64_t> sink(size_t(pool.size()) * 8);
  const double t = best_time(reps, [&] {
    pool.parallel_for(pool.size(), [&](int64_t a, int64_t b) {
      for (int64_t w = a; w < b; ++w) {
        const size_t n = buf.size() / size_t(pool.size());
        sink[size_t(w) * 8] = sum_avx2(buf.data() + size_t(w) * n, n);
      }
    });
  });
  return double(bytes) / t;
}

__attribute__((target("avx512f"))) inline double fma_loop_avx512(int64_t iters) {
  __m512 a[12];
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(float(i));
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 12; ++i) a[i] = _mm512_fmadd_ps(a[i], m, c);
  float s = 0, out[16];
  for (int i = 0; i < 12; ++i) {
    _mm512_storeu_ps(out, a[i]);
    s += out[0];
  }
  return s;
}
__attribute__((target("avx2,fma"))) inline double fma_loop_avx2(int64_t iters) {
  __m256 a[12];
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (int i = 0; i < 12; ++i) a[i] = _mm256_set1_ps(float(i));
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 12; ++i) a[i] = _mm256_fmadd_ps(a[i], m, c);
  float s = 0, out[8];
  for (int i = 0; i < 12; ++i) {
    _mm256_storeu_ps(out, a[i]);
    s += out[0];
  }
  return s;
}

// Peak f32 FLOP/s (2 per lane per FMA) of register-resident FMA chains on the given path,
// with every thread of the pool running the loop.
inline double fma_peak(ThreadPool& pool, SimdLevel level) {
  const int64_t iters = 20'000'000;
  const int lanes = level >= SimdLevel::avx512 ? 16 : (level == SimdLevel::avx2 ? 8 : 1);
  std::vector<double> sink(size_t(pool.size()));
  const double t = best_time(5, [&] {
    pool.parallel_for(pool.size(), [&](int64_t a, int64_t b) {
      for (int64_t w = a; w < b; ++w) {
        if (level >= SimdLevel::avx512) sink[size_t(w)] = fma_loop_avx512(iters);
        else if (level == SimdLevel::avx2) sink[size_t(w)] = fma_loop_avx2(iters);
      }
    });
  });
  return double(iters) * 12 * lanes * 2 * pool.size() / t;
}

}  // namespace ember::bench
