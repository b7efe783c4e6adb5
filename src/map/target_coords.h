#pragma once
// The target's snapshot coordinates for a mapped cache: model and tokenizer identity,
// geometry, RoPE, attention, representation and numerics of a live engine, as a
// kv::SnapshotManifest whose prefix, resume and payload are left empty. The same coordinates
// a native export of that engine records (kv::describe_target), so `kv compare` and
// `map replay` check a mapped cache against exactly what a native snapshot would carry.
#include <string>

#include "kv/state.h"
#include "model/engine.h"

namespace ember::map {

kv::SnapshotManifest target_coordinates(const model::Engine& engine, const std::string& tokenizer_identity);

}  // namespace ember::map
