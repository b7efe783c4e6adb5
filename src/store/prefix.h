#pragma once
// Prefix reuse through the store: restore the longest stored prefix of a prompt, compute the
// rest, continue; and store a prompt's state after prefill. Under canonical-v1 (docs/numerics.md)
// a row of K/V depends only on its token, position and the rows before it, so a restored
// prefix followed by the computed rest gives the cold run's logits bit for bit.
//
// Lookup: the chained hashes h_1..h_B of the prompt's full 16-token blocks (store.h
// prefix_chain) within its first L-1 tokens (at least one prompt token is always computed,
// so the boundary logits are the engine's own), tried longest first. A hit names a state;
// it is read with every check of Store::get, imported strictly against the engine
// (kv::import_checked), and its tokens are compared with the prompt's: the restored length
// is their common prefix (never trusted from the hash), capped at L-1.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "model/engine.h"
#include "kv/witness.h"
#include "store/store.h"

namespace ember::store {

enum class OnBadState { fail, recompute };

struct PrefixRestore {
  model::KvCache cache;  // capacity >= the prompt, n_pos = restored
  int restored = 0;      // prompt positions taken from the store
  std::string seal;      // the state they came from ("" when none)
  std::string report;    // one line for the user: hit, miss, or the failure recomputed
};

// Looks up and restores (above). A state that fails a check is an Error naming it (the
// chunk, the field), unless on_bad_state == recompute: then nothing is restored and report says why.
PrefixRestore restore_longest_prefix(Store& store, const model::Engine& engine, const std::string& tokenizer_identity,
                                     std::span<const int32_t> prompt, OnBadState on_bad_state);

// Stores the prompt's state after prefill: positions [0, L) of `cache` (which may hold more),
// with the resume token chosen from `boundary_logits` by greedy argmax (ties: lowest id),
// sealed exactly as `kv export` seals (the same prompt gives the same seal; kv::seal_prefill),
// witness included (`witness` tokens, 0: none): `engine` decodes it on a copy of the rows.
PutResult save_prefill(Store& store, model::Engine& engine, const std::string& tokenizer_identity,
                       std::span<const int32_t> prompt, const model::KvCache& cache,
                       std::span<const float> boundary_logits, const std::string& producer,
                       const PutOptions& options, int witness = kv::kDefaultWitnessLength);

struct StoreRunOptions {
  int steps = 16;
  std::function<bool(int32_t)> is_eog;
  bool keep_logits = false;  // every step's logits (step 0: the boundary logits)
  Store* from = nullptr;     // --store
  Store* save_to = nullptr;  // --save-to
  OnBadState on_bad_state = OnBadState::fail;
  std::string producer;
  PutOptions save;
};

struct StoreRun {
  std::vector<int32_t> tokens;
  std::vector<float> logits;
  bool stopped_at_eog = false;
  int restored = 0;
  std::string report;  // the restore line ("" without --store)
  PutResult saved;     // when save_to
};

// Greedy continuation of `prompt` with its longest stored prefix restored (when from) and
// its state stored after prefill (when save_to).
StoreRun run_with_store(model::Engine& engine, const std::string& tokenizer_identity, std::span<const int32_t> prompt,
                        const StoreRunOptions& options);

}  // namespace ember::store
