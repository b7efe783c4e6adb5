#pragma once
// The target's snapshot coordinates for a mapped cache: model and tokenizer identity,
// geometry, RoPE, attention, representation and numerics of a live engine, as a
// kv::SnapshotManifest whose prefix, resume and payload are left empty.
// (The snapshot module's kv::describe_target serves the same purpose for native exports;
// this is map's own until that lands, filled from the same ModelConfig fields.)
#include <string>

#include "kv/snapshot.h"
#include "model/engine.h"

namespace ember::map {

kv::SnapshotManifest target_coordinates(const model::Engine& engine, const std::string& tokenizer_identity);

}  // namespace ember::map
