// Mapping throughput: MB of K/V per second through map::map_layers (de-rotate, f64 map,
// rotate, f16 round, per head and position), as a ratio to copying the same bytes (memcpy)
// in the same run; and one per-head ridge fit's time against accumulating its rows.
//
//   bench_map [layers kv_heads head_dim positions]   (default 16 8 64 512, Llama-3.2-1B-like)
//
// The mapping path is scalar f64 by design (deterministic, no SIMD dependence); the ratio
// says how far a pure-mapping handoff is from a plain copy of the cache.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench_limits.h"
#include "map/apply.h"
#include "map/mapper.h"
#include "map/split.h"
#include "util/f16.h"

int main(int argc, char** argv) {
  using namespace ember;
  int L = 16, G = 8, D = 64, P = 512;
  if (argc == 5) {
    L = std::atoi(argv[1]);
    G = std::atoi(argv[2]);
    D = std::atoi(argv[3]);
    P = std::atoi(argv[4]);
  }
  if (L < 1 || G < 1 || D < 2 || D % 2 || P < 1) {
    std::fprintf(stderr, "usage: bench_map [layers kv_heads head_dim(even) positions]\n");
    return 2;
  }
  model::ModelConfig c;
  c.n_layers = L;
  c.n_kv_heads = G;
  c.n_heads = G;
  c.head_dim = D;
  c.n_embd = G * D;
  c.rope_theta = 10000.0f;
  map::ModelGeometry g{"bench", "llama", L, G, D, G * D};
  map::Mapper m = map::identity_mapper(g, g, "bench", 0);
  m.kind = map::MapperKind::affine;
  map::Rng rng(1);
  for (auto& h : m.heads)
    for (auto* lm : {&h.k, &h.v}) {
      for (auto& w : lm->w) w = rng.normal() / D;
      for (auto& b : lm->b) b = rng.normal() * 0.01;
    }
  model::KvCache src(L, G, D, P), dst(L, G, D, P);
  src.n_pos = P;
  for (auto* arr : {&src.k, &src.v})
    for (auto& h : *arr) h = f32_to_f16(float(rng.normal()));
  const double bytes = double(src.k.size() + src.v.size()) * 2;
  const double t_map = bench::best_time(3, [&] { map::map_layers(m, c, c, src, 0, 0, L, dst); });
  const double t_copy = bench::best_time(5, [&] {
    std::memcpy(dst.k.data(), src.k.data(), src.k.size() * 2);
    std::memcpy(dst.v.data(), src.v.data(), src.v.size() * 2);
  });
  std::printf("geometry: %d layers x %d KV heads x %d dim x %d positions (%.1f MiB of K+V)\n", L, G, D, P,
              bytes / (1 << 20));
  std::printf("map_layers: %.1f MB/s; memcpy: %.1f MB/s; ratio map/memcpy throughput: %.4f\n",
              bytes / t_map / 1e6, bytes / t_copy / 1e6, t_copy / t_map);
  return 0;
}
