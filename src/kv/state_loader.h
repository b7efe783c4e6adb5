#pragma once
// One loading entry point for a saved native KV state, whatever its container:
//   - a directory: an ember.kv-snapshot.v1 snapshot (read_snapshot: the one directory reader,
//     verified in full; a mapped cache is refused by name);
//   - a regular file: a KVC1 container (docs/formats/kvc1.md), converted to the same
//     Snapshot (the KVC1 reader verifies its own hashes and fills the manifest's payload
//     entries as the snapshot directory would have them, so import checks are identical).
// `kv replay`, `kv compare` and the mapper call this, never a format reader directly.
#include <string>

#include "kv/snapshot.h"

namespace ember::kv {

// Error naming the path when it is neither, or when the content is refused. Non-finite K/V
// are refused unless allow_non_finite (kv compare --allow-non-finite only).
Snapshot load_state(const std::string& path, bool allow_non_finite = false);

// The same dispatch for a reader of another kind (Accept::mapped: ember map replay; any: kv
// compare): a directory through read_state_dir, a KVC1 file through read_kvc1_state, each
// refusing a kind `accept` does not take by name.
StateDir load_state_as(const std::string& path, Accept accept, bool allow_non_finite = false);

// What load_state() would dispatch to: "snapshot-dir", "kvc1" or "" (neither).
std::string state_kind(const std::string& path);

}  // namespace ember::kv
