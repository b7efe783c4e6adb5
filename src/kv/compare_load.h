#pragma once
// Turns what `kv::load_state` returns into the input of `kv compare` (compare_state.h).
// The snapshot's manifest supplies the identity and the coordinates; the cache is moved.
//
// Mapped caches (docs/compare.md, "alignment"): when the mapper's artifact lands, its loader
// returns a state of kind "mapped" whose provenance names the mapper hash and the source
// snapshot, converted here the same way; nothing else in compare changes.
#include <string>

#include "kv/compare_state.h"
#include "kv/snapshot.h"

namespace ember::kv {

// Representation coordinates of a manifest, as compared by check_alignment().
NamedValues representation_of(const SnapshotManifest& m);
// "F32,Q8_0,..." from "canonical-v1;weights=F32,Q8_0;..." ("" if absent).
std::string weights_of_fingerprint(const std::string& fingerprint);

// A native snapshot. snapshot_id = SHA-256 of the canonical manifest bytes.
ComparedState compared_from_snapshot(Snapshot s);

// load_state(path) then compared_from_snapshot().
ComparedState load_compared_state(const std::string& path);

// A mapped cache (ember.kv-mapped.v1, kv/mapped_state.h): kind "mapped", the target's
// coordinates from its manifest, provenance naming the mapper hash, kind, s, a and the source.
// snapshot_id = SHA-256 of the mapped manifest file's bytes.
ComparedState compared_from_mapped(const std::string& dir);

// What `kv compare` reads on each side: a mapped cache when DIR declares ember.kv-mapped,
// otherwise load_compared_state() (native snapshot or KVC1). Perturbation sources stay native.
ComparedState load_compared_state_or_mapped(const std::string& path);

}  // namespace ember::kv
