#pragma once
// Export and replay of native KV state through the engine's own generation loop
// (model/generate.h), so that "uninterrupted" and "export + replay" run the same code.
//
//   prompt t[0..P)            boundary logits          replay step k (k = 1..)
//   prefill -> cache [0, P)   -> argmax = resume token  evaluates the previous token at
//                                r (stored, at P, NOT    position P+k-1 and yields the
//                                in the cache)           logits for position P+k
//
// The boundary logits are returned by export for the replay gate but are never part of a
// snapshot; the last prompt token is never fed again.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "kv/state.h"
#include "kv/witness.h"
#include "model/engine.h"

namespace ember::kv {

struct ExportResult {
  VerifiedState snapshot;             // sealed, ready for write_state_dir()
  std::vector<float> boundary_logits;  // [n_vocab]: the logits after prefix token P-1
};

// Prefills `prefix` (P >= 1 ids) into a fresh cache of exactly P positions, selects the
// resume token from the boundary logits by greedy argmax (ties: lowest id), records the proof
// (the boundary logits' hash and a witness of `witness` tokens, kv/witness.h; 0: none) and seals.
ExportResult export_prefix(model::Engine& engine, const std::string& tokenizer_identity,
                           std::span<const int32_t> prefix, const std::string& producer,
                           int witness = kDefaultWitnessLength);

// The sealed state a prefill leaves: `cache` holds exactly the P = prefix.size() positions
// of `prefix`; the resume token is chosen from `boundary_logits` (the logits after position
// P - 1) by greedy argmax (ties: lowest id); the proof records their hash and a witness of
// `witness` tokens (kv/witness.h; 0: none). kv export and the store's saves both build their
// state here, so one prompt gives one seal. `where` names the caller in errors.
VerifiedState seal_prefill(model::Engine& engine, const std::string& tokenizer_identity,
                           std::span<const int32_t> prefix, model::KvCache cache,
                           std::span<const float> boundary_logits, const std::string& producer, int witness,
                           const std::string& where);

struct Continuation {
  std::vector<int32_t> tokens;  // the selected ids, in order
  std::vector<float> logits;    // [tokens.size()][n_vocab] when kept, else empty
  bool stopped_at_eog = false;
};

struct ContinueOptions {
  int steps = 16;                        // selection steps
  std::function<bool(int32_t)> is_eog;   // null: never stop early
  bool keep_logits = false;
  std::string where = "snapshot import";  // names the snapshot in import errors
  // A foreign cache (another engine's numerics, kv/snapshot.h) may be continued: the import
  // then skips only the numerics fields (check_compatible). `kv replay --allow-foreign`.
  bool allow_foreign = false;
};

// Strict import (import.h) against `engine`, then: evaluate the resume token at position P,
// and for each step select greedily from the last logits (step 0 = logits for P+1). The
// snapshot is not modified.
Continuation replay(const VerifiedState& snapshot, model::Engine& engine,
                    const std::string& tokenizer_identity, const ContinueOptions& options);

// Uninterrupted greedy generation from `prompt` (the control condition): step 0's logits are
// the boundary logits, step k's the logits after the k-th generated token.
Continuation generate_native(model::Engine& engine, std::span<const int32_t> prompt,
                             const ContinueOptions& options);

}  // namespace ember::kv
