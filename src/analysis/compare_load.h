#pragma once
// Turns what `kv::load_state` returns into the input of `kv compare` (compare_state.h).
// The snapshot's manifest supplies the identity and the coordinates; the cache is moved.
//
// Mapped caches (docs/compare.md, "alignment"): the one directory reader returns the manifest
// and its provenance; a mapped one becomes a state of kind "mapped" whose provenance names
// the mapper hash and the source snapshot; nothing else in compare changes.
//
// `allow_non_finite` (kv compare --allow-non-finite) lets a cache holding NaN/Inf K/V be
// loaded for analysis; every other check still applies. Nothing else ever sets it.
#include <string>

#include "analysis/compare_state.h"
#include "kv/snapshot.h"

namespace ember::kv {

// Representation coordinates of a manifest, as compared by check_alignment().
NamedValues representation_of(const SnapshotManifest& m);
// "F32,Q8_0,..." from "canonical-v1;weights=F32,Q8_0;..." ("" if absent).
std::string weights_of_fingerprint(const std::string& fingerprint);

// A native snapshot. snapshot_id = SHA-256 of the canonical manifest bytes.
ComparedState compared_from_snapshot(Snapshot s);

// load_state(path) then compared_from_snapshot().
ComparedState load_compared_state(const std::string& path, bool allow_non_finite = false);

// A directory as read by read_state_dir (either kind). A mapped cache (ember.kv-mapped.v1):
// kind "mapped", the target's coordinates from its manifest, provenance naming the mapper
// hash, kind, s, a and the source; snapshot_id = SHA-256 of the manifest bytes read.
ComparedState compared_from_state_dir(StateDir d);

// What `kv compare` reads on each side: a directory of either kind (read_state_dir with
// Accept::any), or a KVC1 file (native). Perturbation sources stay native.
ComparedState load_compared_state_or_mapped(const std::string& path, bool allow_non_finite = false);

}  // namespace ember::kv
