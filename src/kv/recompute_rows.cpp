#include "kv/recompute_rows.h"

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "util/error.h"

namespace ember::kv {
namespace {

void copy_position(const model::KvCache& from, model::KvCache& to, int p) {
  for (int l = 0; l < from.n_layers; ++l)
    for (int h = 0; h < from.n_kv_heads; ++h) {
      std::copy_n(from.k_row(l, h, p), from.head_dim, to.k_row(l, h, p));
      std::copy_n(from.v_row(l, h, p), from.head_dim, to.v_row(l, h, p));
    }
}

// Every position in one Engine::step, each over a copy of rows [0, p) with room for p.
void recompute_in_one_step(model::Engine& engine, const model::KvCache& cache, std::span<const int32_t> tokens,
                           std::span<const int> positions,
                           const std::function<void(const RecomputedPosition&)>& visit) {
  const int P = cache.n_pos;
  std::vector<model::KvCache> copies;
  copies.reserve(positions.size());
  std::vector<model::SequenceStep> seqs;
  for (int p : positions) {
    copies.push_back(cache.copy_rows(p, 1));
    seqs.push_back({&copies.back(), tokens.subspan(size_t(p), 1), p == P - 1});
  }
  const std::vector<float> logits = engine.step(seqs);  // the last position's, if it is one
  for (size_t i = 0; i < positions.size(); ++i) {
    const bool last = positions[i] == P - 1;
    visit(RecomputedPosition{positions[i], &cache, &copies[i], last ? std::span<const float>(logits) : std::span<const float>(), {}, {}});
  }
}

}  // namespace

void recompute_positions(model::Engine& engine, const model::KvCache& cache,
                         std::span<const int32_t> tokens, std::span<const int> positions,
                         const std::function<void(const RecomputedPosition&)>& visit,
                         const RecomputeOptions& options) {
  const int P = cache.n_pos;
  if (tokens.size() < size_t(P))
    fail_field("recompute", "tokens", "at least " + std::to_string(P) + " ids (the cache's prefix)",
               std::to_string(tokens.size()));
  for (size_t i = 0; i < positions.size(); ++i) {
    const int p = positions[i];
    if (p < 0 || p >= P || (i > 0 && p <= positions[i - 1]))
      fail_field("recompute", "positions", "strictly increasing positions in [0, " + std::to_string(P) + ")",
                 std::to_string(p));
  }
  if (positions.empty()) return;
  if (!options.f32_rows) {
    // K and V, f16, every layer and KV head of one position.
    const size_t row_bytes = 2 * size_t(cache.n_layers) * size_t(cache.n_kv_heads) * size_t(cache.head_dim) *
                             sizeof(uint16_t);
    size_t bytes = 0;
    for (int p : positions) bytes += (size_t(p) + 1) * row_bytes;
    if (bytes <= options.max_batch_bytes) return recompute_in_one_step(engine, cache, tokens, positions, visit);
  }
  model::KvCache work = cache.copy_rows(P);
  const size_t row = size_t(cache.n_kv_heads) * size_t(cache.head_dim);
  std::vector<float> k32(size_t(cache.n_layers) * row), v32(k32.size());
  model::ForwardHooks hooks;
  hooks.on_kv = [&](int layer, int, int n, const float*, const float* k_post, const float* v) {
    EMBER_CHECK(n == 1 && layer >= 0 && layer < cache.n_layers);
    std::copy_n(k_post, row, k32.data() + size_t(layer) * row);
    std::copy_n(v, row, v32.data() + size_t(layer) * row);
  };
  const int L = cache.n_layers;
  std::vector<float> x(size_t(engine.config().n_embd));
  for (int p : positions) {
    work.n_pos = p;
    if (p == P - 1) {  // the boundary: its logits are checked too
      const std::vector<float> logits = engine.forward(work, tokens.subspan(size_t(p), 1), &hooks);
      visit(RecomputedPosition{p, &cache, &work, logits, k32, v32});
    } else {
      // Only the rows: the last layer's attention and MLP and the LM head would be thrown
      // away (on a 0.5B model the LM head alone is a quarter of a decode step). The same
      // parts forward() is made of, so the rows are its bits.
      engine.embed(tokens.subspan(size_t(p), 1), x.data());
      engine.run_layers(0, L - 1, work, p, 1, x.data(), &hooks);
      engine.project_kv(L - 1, x.data(), 1, p, work, &hooks);
      visit(RecomputedPosition{p, &cache, &work, {}, k32, v32});
    }
    copy_position(cache, work, p);
  }
}

std::vector<int> spot_positions(int n_pos, int k, uint64_t seed) {
  if (n_pos <= 0) return {};
  k = std::clamp(k, 1, n_pos);
  std::vector<int> others(size_t(n_pos - 1));
  for (int i = 0; i < n_pos - 1; ++i) others[size_t(i)] = i;
  // A partial Fisher-Yates shuffle: k - 1 distinct draws, reproducible across platforms
  // (std::uniform_int_distribution is not, so the draw is done by hand from mt19937_64).
  std::mt19937_64 gen(seed);
  for (int i = 0; i < k - 1; ++i) {
    const uint64_t span = uint64_t(n_pos - 1 - i);
    const int j = i + int(gen() % span);
    std::swap(others[size_t(i)], others[size_t(j)]);
  }
  std::vector<int> out(others.begin(), others.begin() + (k - 1));
  out.push_back(n_pos - 1);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace ember::kv
