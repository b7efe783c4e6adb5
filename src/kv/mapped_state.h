#pragma once
// ember.kv-mapped.v1: a cache authored by a mapper or a recompute-anchor handoff, for a target
// model. It is NOT a native snapshot and never passes for one: its manifest says
// "format": "ember.kv-mapped", so `kv replay` (which reads only ember.kv-snapshot) refuses it
// by name; `ember map replay` resumes the target from it, and tools that accept it say so.
//
//   DIR/manifest.json   the target's snapshot coordinates (the ember.kv-snapshot.v1 manifest
//                       fields: model, tokenizer, geometry, RoPE, attention, representation,
//                       numerics, prefix, resume, payload hashes) with "format" replaced by
//                       "ember.kv-mapped", plus a "mapping" object: the provenance below
//   DIR/keys.f16le      as in a snapshot: f16 [layer][kv_head][position][dim], post-RoPE
//   DIR/values.f16le
// The resume token is the source's (chosen from the source's boundary logits). Byte layout and
// rejections: docs/mapping.md.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kv/snapshot.h"

namespace ember::kv {

inline constexpr const char* kMappedFormat = "ember.kv-mapped";

struct MappedProvenance {
  std::string kind;               // identity | ridge | affine | hybrid
  std::string mapper_hash;        // "" only for an unmapped hybrid (a == s)
  std::string calibration_split_hash;
  int shared_layers = 0;          // s
  int anchor = 0;                 // a (a == n_layers: pure mapping)
  std::vector<std::string> layer_roles;  // per layer: reused | mapped | recomputed | kv-projected
  std::string source_model_identity;
  std::string source_manifest_sha256;  // SHA-256 of the source snapshot's manifest.json bytes
  std::string source_prefix_sha256;

  nlohmann::ordered_json to_json() const;
  static MappedProvenance from_json(const nlohmann::json& j, const std::string& where);
};

struct MappedState {
  SnapshotManifest manifest;  // the target's coordinates (format field: kSnapshotFormat in memory)
  model::KvCache cache;       // capacity == n_pos == P
  MappedProvenance mapping;
};

// Fills the payload entries from the cache and writes DIR atomically (refuses an existing DIR
// unless force).
void write_mapped_state(MappedState& s, const std::string& dir, bool force);
// Strict read: format and version, the snapshot fields' own validation, the provenance, sizes
// and SHA-256 of both payloads.
MappedState read_mapped_state(const std::string& dir);
// True when DIR/manifest.json exists and declares "format": "ember.kv-mapped".
bool is_mapped_state(const std::string& dir);

}  // namespace ember::kv
