#pragma once
// Turns a verified state (kv::open_state, store::open_state) into the input of `kv compare` (compare_state.h).
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
#include "kv/state.h"

namespace ember::analysis {

// Representation coordinates of a manifest, as compared by check_alignment(): the
// kRepresentation rows of kv/manifest_fields.h in list order, named without "representation.",
// f32 values in "%.9g" (every f32 round-trips).
NamedValues representation_of(const kv::SnapshotManifest& m);
// "F32,Q8_0,..." from "canonical-v1;weights=F32,Q8_0;..." ("" if absent).
std::string weights_of_fingerprint(const std::string& fingerprint);

// A verified state of any kind, moved: the manifest supplies the identity and the
// coordinates, snapshot_id = SHA-256 of its canonical manifest bytes. A mapped cache
// (ember.kv-mapped.v1) is kind "mapped" with provenance naming the mapper hash, kind, s, a and
// the source; a foreign one (ember.kv-foreign.v1) kind "foreign" with its engine, source format,
// cache types and details, so compare labels the pair cross-engine.
ComparedState compared_from_state(kv::VerifiedState s);

}  // namespace ember::analysis
