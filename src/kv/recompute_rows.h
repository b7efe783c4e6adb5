#pragma once
// Recomputes chosen positions of a cache from the cache itself: the check any cache can be
// given at the cost of a few decode steps instead of a prefill.
//
// ember's decode of token p over rows [0, p) is bit for bit its prefill of row p
// (docs/numerics.md), so for a cache ember computed with the same model, the K/V rows
// recomputed at p equal the stored rows of p exactly, and the logits of the last position
// equal the boundary logits of the prefill. A row that another engine, another model, a
// lossy codec or a bit flip produced shows as a difference at p itself or, through attention,
// at any sampled position after it. Importers of foreign caches compare against a bound the
// cache's type explains; native snapshots compare bit for bit.
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "model/engine.h"

namespace ember::kv {

// One recomputed position: its K/V rows for every layer and KV head, beside the cache's own.
struct RecomputedPosition {
  int position = 0;
  const model::KvCache* stored = nullptr;      // the cache checked (row `position` is its own)
  const model::KvCache* recomputed = nullptr;  // row `position` holds the recomputed K/V
  // [n_vocab]: the next-token logits after `position`, for the cache's last position only
  // (empty for the others: their rows are all a check reads).
  std::span<const float> logits;
  // The recomputed rows before rounding to the f16 cache, as the engine's ForwardHooks::on_kv
  // sees them: [n_layers][n_kv_heads][head_dim], keys after RoPE. What another engine
  // quantizes from, so a model of its cache type starts here (kv/foreign_check.h).
  std::span<const float> k_f32, v_f32;
};

struct RecomputeOptions {
  // Report the f32 rows (RecomputedPosition::k_f32/v_f32): a foreign cache's check models
  // its cache type from them. Only a forward pass of one position at a time reports them.
  bool f32_rows = true;
  // Without f32 rows, the positions run as one Engine::step, each over its own copy of rows
  // [0, p): a decode step's cost is mostly reading the weights, which the batch reads once
  // for all of them. Batch invariance (docs/numerics.md) keeps each position's rows its
  // forward() bits. Past this many bytes of copies, one position at a time over one copy.
  size_t max_batch_bytes = size_t(1) << 30;
};

// For each position p in `positions` (strictly increasing, each in [0, cache.n_pos)):
// evaluates tokens[p] at p over the cache's own rows [0, p) and calls `visit` with the
// recomputed rows. Rows after p are never read, and each recomputed row is put back to the
// stored one before the next position, so every position is checked against the cache as
// stored. `tokens` holds at least cache.n_pos ids (the cache's prefix). Costs one copy of the
// cache and one decode step per position (less its last layer's attention and MLP and the LM
// head, except at the last position), or, batched (RecomputeOptions), one copy per position
// and one step for all.
void recompute_positions(model::Engine& engine, const model::KvCache& cache,
                         std::span<const int32_t> tokens, std::span<const int> positions,
                         const std::function<void(const RecomputedPosition&)>& visit,
                         const RecomputeOptions& options = {});

// k distinct positions of [0, n_pos), ascending, always holding the last (n_pos - 1); the
// others drawn uniformly by a generator seeded with `seed`. k is clamped to [1, n_pos].
std::vector<int> spot_positions(int n_pos, int k, uint64_t seed);

}  // namespace ember::kv
