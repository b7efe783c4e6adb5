#pragma once
// Physical limits measured in the same run as a benchmark, so that results are reported as
// ratios (bench/README.md): memory-read bandwidth, peak f32 FMA rate and peak int8 MAC rate of
// the active SIMD path.
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

// The calling thread's CPU time, in seconds: for the compute peaks, whose loops touch no memory,
// so that time a neighbour on a shared VM takes from the thread is not counted against the core.
inline double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

// Ops per second of a register-only loop run once on every thread of the pool: each thread
// times its own run in its CPU time, and the rates add up; the best of `reps` rounds. loop()
// runs `iters` iterations of `ops_per_iter` operations and returns a value to keep.
template <class Loop>
double per_thread_peak(ThreadPool& pool, int64_t iters, double ops_per_iter, int reps, Loop&& loop) {
  std::vector<double> secs(size_t(pool.size()));
  std::vector<double> sink(size_t(pool.size()));
  double best = 0;
  for (int rep = 0; rep < reps; ++rep) {
    pool.parallel_for(pool.size(), [&](int64_t a, int64_t b) {
      for (int64_t w = a; w < b; ++w) {
        const double t0 = thread_cpu_s();
        sink[size_t(w)] = double(loop(iters));
        secs[size_t(w)] = thread_cpu_s() - t0;
      }
    });
    double rate = 0;
    for (double t : secs) rate += double(iters) * ops_per_iter / t;
    best = rep == 0 || rate > best ? rate : best;
  }
  return best;
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
// with every thread of the pool running the loop (per_thread_peak: in each thread's CPU time).
inline double fma_peak(ThreadPool& pool, SimdLevel level) {
  const int64_t iters = 20'000'000;
  const SimdLevel base = simd_base(level);
  const int lanes = base == SimdLevel::avx512 ? 16 : 8;
  return per_thread_peak(pool, iters, 12.0 * lanes * 2, 5, [&](int64_t n) {
    return base == SimdLevel::avx512 ? fma_loop_avx512(n) : fma_loop_avx2(n);
  });
}

// Peak int8 multiply-accumulate rate, measured the way fma_peak is: 12 register-resident
// instances per iteration of the instruction sequence the quantized kernels use for an int8 dot
// product (12 vpdpbusd chains, whose latency is on the accumulator; 4 chains x 3 of vpmaddubsw +
// vpmaddwd + vpaddd, whose chain is the 1-cycle vpaddd), every thread of the pool running the
// loop. avx512vnni: vpdpbusd (64 u8 x s8 MACs per instruction into 16 int32 lanes); avxvnni /
// avxvnni-evex: vpdpbusd on ymm (32 MACs; the VEX and the EVEX encoding); avx512 / avx2:
// vpmaddubsw + vpmaddwd + vpaddd (64 / 32 MACs per sequence), as kernels_avx512.cpp / kernels_avx2.cpp. Returned as operations per
// second, 2 per MAC, so it compares with a FLOP count of 2 per weight per token.
// 12 vpdpbusd chains in one asm statement per iteration (as the AVX2 loop below says why): with
// intrinsics GCC 12 stored the ymm sums to the stack every iteration in the VEX build, and on
// the Zen 5 VM those stores halved the rate (255 against 448 GOP/s, 2 per cycle as the EVEX
// twin and zmm run). PREFIX picks the encoding: "%{vex%} " for AVX-VNNI, "%{evex%} " for the
// EVEX twin ("%{" is a literal brace in an asm template).
#define EMBER_DPBUSD(PREFIX, a) PREFIX "vpdpbusd %[u], %[w], %[" #a "]\n\t"
#define EMBER_DPBUSD_LOOP(V, SET1_8, SET1_32, ADD, STORE, LANES, PREFIX, C)                          \
  const V u = SET1_8(3), w = SET1_8(-5);                                                          \
  V a0 = SET1_32(0), a1 = SET1_32(1), a2 = SET1_32(2), a3 = SET1_32(3), a4 = SET1_32(4),          \
    a5 = SET1_32(5), a6 = SET1_32(6), a7 = SET1_32(7), a8 = SET1_32(8), a9 = SET1_32(9),          \
    a10 = SET1_32(10), a11 = SET1_32(11);                                                         \
  for (int64_t it = 0; it < iters; ++it)                                                          \
    __asm__ volatile(EMBER_DPBUSD(PREFIX, a0) EMBER_DPBUSD(PREFIX, a1) EMBER_DPBUSD(PREFIX, a2)   \
                         EMBER_DPBUSD(PREFIX, a3) EMBER_DPBUSD(PREFIX, a4) EMBER_DPBUSD(PREFIX, a5) \
                             EMBER_DPBUSD(PREFIX, a6) EMBER_DPBUSD(PREFIX, a7)                    \
                                 EMBER_DPBUSD(PREFIX, a8) EMBER_DPBUSD(PREFIX, a9)                \
                                     EMBER_DPBUSD(PREFIX, a10) EMBER_DPBUSD(PREFIX, a11)          \
                     : [a0] "+" C(a0), [a1] "+" C(a1), [a2] "+" C(a2), [a3] "+" C(a3),            \
                       [a4] "+" C(a4), [a5] "+" C(a5), [a6] "+" C(a6), [a7] "+" C(a7),            \
                       [a8] "+" C(a8), [a9] "+" C(a9), [a10] "+" C(a10), [a11] "+" C(a11)         \
                     : [u] C(u), [w] C(w));                                                       \
  alignas(64) int32_t out[LANES];                                                                 \
  STORE(out, ADD(ADD(ADD(a0, a1), ADD(a2, a3)), ADD(ADD(ADD(a4, a5), ADD(a6, a7)),                \
                                                    ADD(ADD(a8, a9), ADD(a10, a11)))));           \
  int64_t s = 0;                                                                                  \
  for (int l = 0; l < LANES; ++l) s += out[l];                                                    \
  return s;
__attribute__((target("avx512f,avx512bw,avx512vnni"))) inline int64_t mac_loop_vnni(int64_t iters) {
  EMBER_DPBUSD_LOOP(__m512i, _mm512_set1_epi8, _mm512_set1_epi32, _mm512_add_epi32,
                    _mm512_store_si512, 16, "", "v")
}
__attribute__((target("avx2"))) inline void store_ymm(int32_t* out, __m256i v) {
  _mm256_store_si256(reinterpret_cast<__m256i*>(out), v);
}
// 12 chains + 2 operands fit AVX2's 16 registers ("x": ymm0-15, all VEX can name).
__attribute__((target("avx2,avxvnni"))) inline int64_t mac_loop_avxvnni(int64_t iters) {
  EMBER_DPBUSD_LOOP(__m256i, _mm256_set1_epi8, _mm256_set1_epi32, _mm256_add_epi32, store_ymm, 8,
                    "%{vex%} ", "x")
}
__attribute__((target("avx2,avx512vl,avx512vnni"))) inline int64_t mac_loop_avxvnni_evex(int64_t iters) {
  EMBER_DPBUSD_LOOP(__m256i, _mm256_set1_epi8, _mm256_set1_epi32, _mm256_add_epi32, store_ymm, 8,
                    "%{evex%} ", "v")
}
#undef EMBER_DPBUSD_LOOP
#undef EMBER_DPBUSD
// One asm statement per iteration, every value in a register it names: with intrinsics GCC
// kept some sums on the stack (AVX2) or stored every sum once per iteration (AVX-512), and
// those stores, not the multiplies, set the pace (114 GOP/s for AVX2 on the Zen 4 VM, half the
// pair's issue rate). vpaddd has 1 cycle of latency, so 4 chains keep the multiply pipes full.
#define EMBER_MAC_SEQ(x, p, a)                          \
  "vpmaddubsw %[w], %[" #x "], %[" #p "]\n\t"           \
  "vpmaddwd %[one], %[" #p "], %[" #p "]\n\t"           \
  "vpaddd %[" #p "], %[" #a "], %[" #a "]\n\t"
#define EMBER_MAC_ROUND \
  EMBER_MAC_SEQ(x0, p0, a0) EMBER_MAC_SEQ(x1, p1, a1) EMBER_MAC_SEQ(x2, p2, a2) EMBER_MAC_SEQ(x3, p3, a3)
#define EMBER_MAC_LOOP(V, SET1_8, SET1_16, SET1_32, ADD, STORE, LANES)                               \
  const V w = SET1_8(-5), ones = SET1_16(1);                                                        \
  V a0 = SET1_32(0), a1 = a0, a2 = a0, a3 = a0, p0, p1, p2, p3;                                     \
  const V x0 = SET1_8(1), x1 = SET1_8(2), x2 = SET1_8(3), x3 = SET1_8(4);                           \
  for (int64_t it = 0; it < iters; ++it)                                                            \
    __asm__ volatile(EMBER_MAC_ROUND EMBER_MAC_ROUND EMBER_MAC_ROUND                                \
                     : [a0] "+v"(a0), [a1] "+v"(a1), [a2] "+v"(a2), [a3] "+v"(a3), [p0] "=&v"(p0), \
                       [p1] "=&v"(p1), [p2] "=&v"(p2), [p3] "=&v"(p3)                               \
                     : [w] "v"(w), [one] "v"(ones), [x0] "v"(x0), [x1] "v"(x1), [x2] "v"(x2),      \
                       [x3] "v"(x3));                                                               \
  alignas(64) int32_t out[LANES];                                                                   \
  STORE(out, ADD(ADD(a0, a1), ADD(a2, a3)));                                                        \
  int64_t s = 0;                                                                                    \
  for (int l = 0; l < LANES; ++l) s += out[l];                                                      \
  return s;
__attribute__((target("avx512f,avx512bw"))) inline int64_t mac_loop_avx512(int64_t iters) {
  EMBER_MAC_LOOP(__m512i, _mm512_set1_epi8, _mm512_set1_epi16, _mm512_set1_epi32, _mm512_add_epi32,
                 _mm512_store_si512, 16)
}
// "v" is "x" without AVX-512 (the AVX2 build of this header has only ymm0-15).
__attribute__((target("avx2"))) inline int64_t mac_loop_avx2(int64_t iters) {
  EMBER_MAC_LOOP(__m256i, _mm256_set1_epi8, _mm256_set1_epi16, _mm256_set1_epi32, _mm256_add_epi32,
                 store_ymm, 8)
}
#undef EMBER_MAC_LOOP
#undef EMBER_MAC_ROUND
#undef EMBER_MAC_SEQ

inline double int8_mac_peak(ThreadPool& pool, SimdLevel level) {
  const int64_t iters = 20'000'000;
  // MACs per outer iteration: 12 instructions (sequences) of 64 (zmm) or 32 (ymm) MACs.
  const int macs = simd_base(level) == SimdLevel::avx512 ? 12 * 64 : 12 * 32;
  return per_thread_peak(pool, iters, double(macs) * 2, 5, [&](int64_t n) {
    if (level == SimdLevel::avx512vnni) return mac_loop_vnni(n);
    if (level == SimdLevel::avx512) return mac_loop_avx512(n);
    if (level == SimdLevel::avxvnni) return mac_loop_avxvnni(n);
    if (level == SimdLevel::avxvnni_evex) return mac_loop_avxvnni_evex(n);
    return mac_loop_avx2(n);
  });
}

}  // namespace ember::bench
