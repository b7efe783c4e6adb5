// The two attention kernels of the prefill path (model/attention.cpp), one thread, against the
// FMA peak of the same path (both are f32 FMA chains):
//   keys:   ops::dot_f32_keys, the scores of a task's queries against one transposed block of
//           64 keys (2 nq keys D FLOPs);
//   values: ops::axpy_rows_f32, out += p_j v_j over a block of 64 value rows, per query
//           (2 nq 64 D FLOPs);
//   shared: the same through ops::axpy_rows_f32_shared, all the task's queries in one call
//           (the engine's form: each value row loaded once for several queries).
// Usage: bench_attention [simd=active] [head_dim=128] [queries=32] [ld=keys] [keys=64]. A task
// of the engine has up to 16 query tokens times the query heads of one KV head (Qwen3-0.6B: 2,
// so 32 queries); ld is the row stride of the transposed key block (the engine uses keys + 8).
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "bench_limits.h"
#include "ops/vec.h"

using namespace ember;

int main(int argc, char** argv) {
  const SimdLevel level = argc > 1 ? parse_simd(argv[1]) : active_simd();
  const int64_t D = argc > 2 ? std::atoll(argv[2]) : 128;
  const int64_t nq = argc > 3 ? std::atoll(argv[3]) : 32;
  const int64_t kKeys = argc > 5 ? std::atoll(argv[5]) : 64;
  const int64_t ld = argc > 4 ? std::atoll(argv[4]) : kKeys;
  if (D < 16 || D > 1024 || D % 16 != 0 || nq < 1 || nq > 256 || kKeys < 1 || kKeys > 1024 ||
      ld < kKeys || ld > 2048) {
    std::fprintf(stderr, "bench_attention: expected head_dim 16..1024 (a multiple of 16), queries "
                         "1..256, keys 1..1024 and ld keys..2048, found %lld, %lld, %lld, %lld\n",
                 (long long)D, (long long)nq, (long long)kKeys, (long long)ld);
    return 2;
  }
  set_simd_override(level);
  ThreadPool pool(1);
  const double peak = bench::fma_peak(pool, level == SimdLevel::scalar ? SimdLevel::avx2 : level);
  std::printf("attention bench: head_dim=%lld queries=%lld keys=%lld simd=%s, FMA peak %.1f GFLOP/s\n",
              (long long)D, (long long)nq, (long long)kKeys, simd_name(level), peak / 1e9);

  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> q(size_t(nq * D)), kt(size_t(D * ld)), v(size_t(kKeys * D));
  std::vector<float> p(size_t(nq * kKeys)), out(size_t(nq * D)), sc(size_t(nq * kKeys));
  for (auto* vec : {&q, &kt, &v, &p})
    for (auto& x : *vec) x = nd(rng);
  // Enough repetitions per timing that one lasts about a millisecond.
  const int inner = int(std::max<int64_t>(1, 2000000 / (nq * kKeys * D)));
  const double tk = bench::median_time(15, [&] {
    for (int r = 0; r < inner; ++r)
      ops::dot_f32_keys(q.data(), nq, kt.data(), kKeys, D, ld, 0.125f, sc.data(), kKeys);
  }, bench::cpu_now_s);
  const double tv = bench::median_time(15, [&] {
    for (int r = 0; r < inner; ++r)
      for (int64_t i = 0; i < nq; ++i)
        ops::axpy_rows_f32(p.data() + i * kKeys, v.data(), kKeys, D, out.data() + i * D);
  }, bench::cpu_now_s);
  std::vector<const float*> ws(static_cast<size_t>(nq));
  std::vector<float*> ys(static_cast<size_t>(nq));
  for (int64_t i = 0; i < nq; ++i) ws[size_t(i)] = p.data() + i * kKeys, ys[size_t(i)] = out.data() + i * D;
  const double ts = bench::median_time(15, [&] {
    for (int r = 0; r < inner; ++r)
      ops::axpy_rows_f32_shared(ws.data(), v.data(), kKeys, D, ys.data(), int(nq));
  }, bench::cpu_now_s);
  const double flops = 2.0 * double(nq) * double(kKeys) * double(D) * inner;
  std::printf("%-7s %10s %8s\n", "kernel", "GFLOP/s", "/peak");
  std::printf("%-7s %10.1f %8.3f\n", "keys", flops / tk / 1e9, flops / tk / peak);
  std::printf("%-7s %10.1f %8.3f\n", "values", flops / tv / 1e9, flops / tv / peak);
  std::printf("%-7s %10.1f %8.3f\n", "shared", flops / ts / 1e9, flops / ts / peak);
  return 0;
}
