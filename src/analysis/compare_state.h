#pragma once
// What `kv compare` holds of each side: the cache and the coordinates that say where its
// K/V live, plus the identity that says where it came from. A loaded snapshot (native), a
// mapped cache or a perturbed state are all turned into this before comparing; nothing here
// can write a snapshot.
//
// Alignment (docs/compare.md): two states are compared only when every coordinate agrees:
// geometry, positions, prefix tokens, tokenizer identity and representation state. Model
// identities may differ: the comparison then crosses models and the report says so.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/kv_cache.h"
#include "util/ed25519.h"

namespace ember::analysis {

// Ordered (name, value) pairs: printed in this order, compared by name.
using NamedValues = std::vector<std::pair<std::string, std::string>>;

struct StateIdentity {
  std::string kind;                // "native" | "mapped" | "foreign" | "perturbed"
  std::string model_identity;      // hex SHA-256 of the model (docs/identity.md)
  std::string architecture;        // llama | qwen2 | qwen3
  std::string weights;             // weight types from the engine fingerprint, e.g. "F32"
  std::string engine_fingerprint;  // numerics contract and engine fingerprint
  std::string snapshot_id;         // hex SHA-256 of the manifest (or artifact header)
  std::string keys_sha256;         // hex SHA-256 of the active K bytes [layer][head][pos][dim]
  std::string values_sha256;       // same for V
  NamedValues provenance;          // e.g. mapper hash, source snapshot, perturbation receipt
  // The artifact's content identity (kv/seal.h) and its signature when signed, as read: what
  // `kv compare --expect-left/--trust` check before anything is compared.
  std::string seal;
  std::optional<Ed25519Signature> signature;
};

struct StateCoordinates {
  int n_layers = 0, n_kv_heads = 0, head_dim = 0;
  int n_pos = 0;                       // prefix length P = positions [0, P) in the cache
  std::vector<int32_t> prefix_tokens;  // the P tokens at positions [0, P)
  std::string tokenizer_identity;      // hex
  int32_t resume_token = -1;           // chosen from the boundary logits, at position P
  // Representation state, e.g. ("keys", "post-rope"), ("rope.layout", "neox"),
  // ("rope.theta", "10000"), ("qk_norm", "none"), ("values", "linear").
  NamedValues representation;
};

struct ComparedState {
  StateIdentity identity;
  StateCoordinates coords;
  model::KvCache cache;  // n_pos == coords.n_pos; geometry as in coords
};

// Hex SHA-256 of the active K (or V) rows in [layer][head][pos][dim] order, the byte order
// of a snapshot payload: a content identity that does not depend on cache capacity.
std::string active_keys_sha256(const model::KvCache& cache);
std::string active_values_sha256(const model::KvCache& cache);

// Checks that the cache agrees with the coordinates (geometry, n_pos). Error naming `where`.
void check_state_consistent(const ComparedState& s, const std::string& where);

// Refuses, with an Error naming the coordinate and both values, unless LEFT and RIGHT are
// aligned. Checked in a fixed order: geometry, positions, prefix tokens, tokenizer,
// representation.
void check_alignment(const ComparedState& left, const ComparedState& right);

// How the two sides relate when they align.
struct Crossing {
  bool crosses_models = false;
  // One side's K/V were computed by another engine (kind "foreign": its foreign.engine, e.g.
  // llama.cpp) and the other's by ember (native, mapped, perturbed), or by two other engines.
  bool crosses_engines = false;
  // "cross-engine" whenever crosses_engines (whatever the models: the statement names both),
  // else "same-model" | "quantization-boundary" | "cross-model".
  std::string label;
  std::string statement;  // one sentence for the report
};
// The engine whose arithmetic produced a state's K/V: a foreign state's foreign.engine,
// "ember" for every other kind.
std::string state_engine(const StateIdentity& s);
// The cache types a state's K/V were stored in before ember read them: "K q4_0+hadamard-64,
// V q4_0+hadamard-64" for a foreign state (its foreign.cache_type_k/v and rotations), "K f16,
// V f16" for every other kind (ember's cache). Sets *quantized when either is a quantized type.
std::string state_cache_types(const StateIdentity& s, bool* quantized = nullptr);
// The same as a {K, V} pair ("q4_0+hadamard-64", "f16"): the one reading of a side's cache types.
std::pair<std::string, std::string> state_cache_type_pair(const StateIdentity& s);
Crossing classify_crossing(const StateIdentity& left, const StateIdentity& right);

}  // namespace ember::analysis
