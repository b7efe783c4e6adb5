#pragma once
// Strict, fail-closed import of a snapshot into a target (model + tokenizer + engine).
//
// Every coordinate that decides what the cached bits mean is compared exactly, in the order
// of SnapshotManifest::target_fields() (the field list's, kv/manifest_fields.h): model
// identity, architecture and shape, tokenizer identity, geometry, RoPE layout/theta/scaling,
// Q/K normalization, representation state, numerics contract and engine fingerprint, and the
// state's finiteness. The payload is not hashed here:
// a VerifiedState was hashed once, by its reader or by seal() (kv/state.h). The first
// difference is one Error line:
// "<where>: <field>: expected <target's>, found <snapshot's>". There is no "close enough"
// switch, and nothing is decoded before every check has passed. Every import goes through
// import_checked: `kv replay` (native snapshots and KVC1) and `map replay` (mapped caches).
#include <string>

#include "kv/state.h"
#include "model/engine.h"

namespace ember::kv {

// The coordinates a target produces, as a manifest whose model-side fields are filled
// (prefix, resume and payload are left empty). Lives in target.cpp.
SnapshotManifest describe_target(const model::Engine& engine, const std::string& tokenizer_identity);
// The engine's side of the field list: sets every kTarget field of `m` (kv/manifest_fields.h)
// from the engine; prefix, resume and payload are left as they are. A field added to the list as a target
// is added here too (tests/kv/manifest_fields_test.cpp fails until it is).
void fill_target_fields(SnapshotManifest& m, const model::Engine& engine, const std::string& tokenizer_identity);

// Throws on the first field of target_fields() that differs. With allow_foreign and a
// foreign manifest (numerics.contract kForeignContract: a cache another engine computed,
// kv/snapshot.h), numerics.contract and numerics.engine_fingerprint are not compared (they
// name the other engine and can never match); every other field still is. It changes nothing
// for a native or mapped manifest. Only `kv replay --allow-foreign` sets it.
void check_compatible(const SnapshotManifest& snapshot, const SnapshotManifest& target,
                      const std::string& where, bool allow_foreign = false);

// check_compatible, then the state's cache with room for `extra_capacity` more positions
// (cursor at P). The state is verified (kv/state.h): its payload is not hashed again. The
// const overload copies the cache once; the rvalue overload moves it when the reader already
// left that room (ReadOptions::capacity) and copies it otherwise. A mapped cache imports like
// a native one (its provenance plays no part here); a foreign one only with allow_foreign.
model::KvCache import_checked(const VerifiedState& s, const SnapshotManifest& target, int extra_capacity,
                              const std::string& where, bool allow_foreign = false);
model::KvCache import_checked(VerifiedState&& s, const SnapshotManifest& target, int extra_capacity,
                              const std::string& where, bool allow_foreign = false);

// The strict import against a live engine (describe_target + import_checked).
model::KvCache import_for_model(const VerifiedState& s, const model::Engine& engine,
                                const std::string& tokenizer_identity, int extra_capacity,
                                const std::string& where = "snapshot import", bool allow_foreign = false);

}  // namespace ember::kv
