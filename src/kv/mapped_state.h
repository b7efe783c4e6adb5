#pragma once
// ember.kv-mapped.v1: a cache authored by a mapper or a recompute-anchor handoff, for a target
// model. It is the native snapshot directory plus a provenance extension (kv/snapshot.h:
// kMappedFormat, MappedProvenance), read and written by the same reader and writer
// (read_state_dir / write_state_dir). It never passes for a native snapshot: its manifest
// says "format": "ember.kv-mapped", so `kv replay` (Accept::native) refuses it by name;
// `ember map replay` (Accept::mapped) resumes the target from it, and `kv compare`
// (Accept::any) says which kind each side is.
//
//   DIR/manifest.json   canonical: the target's snapshot coordinates (every ember.kv-snapshot.v1
//                       field, same order) with "format": "ember.kv-mapped", then "mapping"
//   DIR/keys.f16le      as in a snapshot: f16 [layer][kv_head][position][dim], post-RoPE
//   DIR/values.f16le
// The resume token is the source's (chosen from the source's boundary logits). Byte layout and
// rejections: docs/mapping.md.
#include <string>

#include "kv/snapshot.h"

namespace ember::kv {

struct MappedState {
  SnapshotManifest manifest;  // the target's coordinates (format field: kSnapshotFormat in memory)
  model::KvCache cache;       // capacity == n_pos == P
  MappedProvenance mapping;
};

// Seals the manifest over the cache (seal_manifest) and writes DIR with write_state_dir:
// atomic, refuses an existing DIR unless force, refuses non-finite K/V leaving nothing.
// With sign_key_pem, the seal is signed with that Ed25519 private key (kv/seal.h).
void write_mapped_state(MappedState& s, const std::string& dir, bool force, const std::string& sign_key_pem = "");
// load_state_as(path, Accept::mapped): a mapped directory (read_state_dir) or a KVC1 file of
// kind mapped (read_kvc1_state), every check of either reader; a native state is refused by name.
MappedState read_mapped_state(const std::string& dir, bool allow_non_finite = false);

}  // namespace ember::kv
