#pragma once
// The witness: a short greedy continuation from a cache, recorded by the prefill that made the
// cache (proof.witness_* in the manifest), which `kv verify --spot` runs again over the cache as
// stored (docs/cli-kv-snapshot.md, "Spot check").
//
// Why it exists: the spot check recomputes K sampled positions and compares their f16 rows bit
// for bit. A row it does not sample is seen only through attention, and one low bit changed in
// one row of thousands moves a later position's f16 row by less than its rounding: measured on
// stories260K at 2,048 positions, K = 4 saw 47 % of the single-bit flips that change a
// continuation's logits (docs/results/spot-verify.md). The witness reads every stored row at W
// new positions and records f32 values, not f16 rows: per layer, the hash of the raw attention
// scores and the attention output of its W positions, and the hash of the last position's
// logits. A stored row that moves any of them is caught; and since the layers below the changed
// one read untouched rows from untouched inputs, the first layer whose attention differs is the
// layer the changed rows are in. The logits of the earlier positions are not hashed: the same
// attention at every layer and position gives the same residuals, so the same logits.
//
// What a passing witness proves is what a user continuing greedily would otherwise find out
// the slow way: the next W tokens' logits are the cold run's, bit for bit. canonical-v1 makes
// one chunk of W tokens equal W decode steps (docs/numerics.md), so the producer decodes (it
// must, to choose the tokens) and the checker runs one chunk.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/engine.h"

namespace ember::kv {

inline constexpr int kDefaultWitnessLength = 16;

struct Witness {
  std::vector<int32_t> tokens;                // W ids: the resume token, then W - 1 greedy choices
  std::string logits_sha256;                  // SHA-256 of the last position's logits, f32 LE
  std::vector<std::string> attention_sha256;  // per layer: SHA-256 of its [W][n_embd] f32 rows
  bool empty() const { return tokens.empty(); }
};

// Decodes `length` tokens greedily (ties: lowest id) from `resume` over a copy of `cache`; the
// cache is not modified. The length is clamped to the room the engine has past cache.n_pos
// (its position limit); none (an empty witness) when `length` < 1 or there is no room.
Witness record_witness(model::Engine& engine, const model::KvCache& cache, int32_t resume, int length);

// Evaluates `tokens` as one chunk over a copy of `cache` and hashes what it computes, as
// record_witness did. For the cache the producer recorded from, the result equals the record.
Witness run_witness(model::Engine& engine, const model::KvCache& cache, std::span<const int32_t> tokens);

}  // namespace ember::kv
