#pragma once
// `ember map hybrid` as a library call: one recompute-anchor handoff of a prompt from a source
// model to a target model (anchor.h explains s, a and the layer roles), the mapped cache it
// hands over, and the reference it is checked against (the target's own full prefill).
//
//   map::HybridRun run = map::run_hybrid(src_engine, tgt_engine, mapper_or_null, ids, a);
//   kv::KvState artifact = map::hybrid_mapped_state(run, tgt_engine, ...);   // seal(), write: --output
//   logits = tgt_engine.forward(run.cache, {&ids.back(), 1});                    // decode on
// or all of the command at once (handoff, greedy decode, --check, the --json report):
//   map::HybridOutcome out = map::hybrid_handoff(src_engine, tgt_engine, ..., options);
//
// Receipts are the contract layer's and stay with the caller (map/ does not link contract/).
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kv/state.h"
#include "map/anchor.h"
#include "map/mapper.h"
#include "map/metrics.h"
#include "map/shared.h"
#include "model/engine.h"

namespace ember::map {

struct HybridRun {
  int s = 0, a = 0;              // shared layers (verified) and the anchor used
  AnchorReport report;
  model::KvCache cache;          // the target's cache over the prefix ids[0, P-1), cursor at P-1
  std::vector<int32_t> prefix;   // ids[0, P-1)
  int32_t resume_token = -1;     // ids[P-1]: the token the target decodes first
};

// Verifies the handoff's inputs, naming `where` and the field: both models share their lower
// layers byte for byte up to s (shared.h, from the tensor hashes); s <= a <= L (a < 0 means
// a = s, the exact hybrid); a mapper, when given, maps this source to this target with the same
// s (one is required when a > s, anchor_handoff refuses otherwise); ids has at least 2 tokens.
// Then prefills the source over the prefix, capturing its residual entering layer a, and
// builds the target's cache by anchor_handoff (the cache grows as it fills).
HybridRun run_hybrid(model::Engine& source, model::Engine& target, const model::Model& source_model,
                     const model::Model& target_model, const Mapper* mapper, std::span<const int32_t> ids,
                     int anchor, const std::string& where);

// The handed-over prefix as an ember.kv-mapped.v1 artifact (kind "hybrid"): the target's
// coordinates with the prefix and resume token, the cache's first P-1 positions, and the
// provenance (mapper hash and calibration split when a mapper was used, s, a, layer roles,
// the source model and the prefix hash).
kv::KvState hybrid_mapped_state(const HybridRun& run, const model::Engine& target,
                                    const std::string& target_tokenizer_identity,
                                    const std::string& source_model_identity, const Mapper* mapper);

// The layer roles of a handoff by name ("reused" | "mapped" | "recomputed"), target layer order.
std::vector<std::string> layer_role_names(const AnchorReport& report);

// One line for the user: "handoff s = 2, a = 2, L = 5: 0:reused 1:reused 2:recomputed ...;
// target prefill work saved 40.0% (weight MACs)".
std::string handoff_line(const HybridRun& run);

// What a handoff is checked against: the target's full prefill of all of ids and its greedy
// continuation of up to n tokens (stopping after an end-of-generation id, as the hybrid's own
// decode does).
struct FullPrefillReference {
  std::vector<float> first_logits;
  std::vector<int32_t> greedy;
};
FullPrefillReference full_prefill_reference(model::Engine& target, std::span<const int32_t> ids, int n,
                                            const std::function<bool(int32_t)>& is_end_of_generation);

// Greedy decoding from `logits` (the last forward's): up to n ids, each the first argmax, the
// forward of each but the last fed back into `cache`; stops after an end-of-generation id.
// `on_token` (may be empty) sees each id as it is chosen, so a caller can stream text.
std::vector<int32_t> greedy_continue(model::Engine& engine, model::KvCache& cache, std::vector<float> logits, int n,
                                     const std::function<bool(int32_t)>& is_end_of_generation,
                                     const std::function<void(int32_t)>& on_token = {});

// `ember map hybrid` after its inputs are loaded and gated: the handoff (run_hybrid), the
// target's greedy decode from the handed-over cache and, with `check`, the comparison with the
// target's own full prefill of the same ids.
struct HybridOptions {
  int anchor = -1;   // a; < 0: s, the exact hybrid
  int n = 16;        // tokens to generate
  bool check = false;
  std::function<bool(int32_t)> is_end_of_generation;   // required
  std::function<void(const HybridRun&)> on_handoff;    // after the handoff, before decoding
  std::function<void(int32_t)> on_token;               // each generated id, as it comes
};
struct HybridCheck {
  LogitComparison first;     // the hybrid's first logits against the full prefill's
  bool same_greedy = false;  // the same generated ids
  // The exact hybrid (a == s) must give the target's own bits and greedy ids; true when it
  // did not (always false for a > s, which is approximate by design).
  bool exact_hybrid_differs = false;
};
struct HybridOutcome {
  HybridRun run;  // its cache holds the prefix and the decoded tokens but the last
  std::vector<float> first_logits;
  std::vector<int32_t> generated;
  std::optional<HybridCheck> check;
  // The --json report: source, target, shared_layers, anchor, handoff, mapper_hash,
  // generated and, with a check, its four results.
  nlohmann::json report(const std::string& source_identity, const std::string& target_identity,
                        const Mapper* mapper) const;
};
HybridOutcome hybrid_handoff(model::Engine& source, model::Engine& target, const model::Model& source_model,
                             const model::Model& target_model, const Mapper* mapper, std::span<const int32_t> ids,
                             const HybridOptions& options, const std::string& where);

}  // namespace ember::map
