// libFuzzer target for the ember.kv-snapshot.v1 manifest reader (README "Fuzzing"): the bytes
// of one input are the text of a manifest.json, fed to SnapshotManifest::from_json, the same
// in-memory entry point read_manifest() (and so read_snapshot / verify_snapshot) calls after
// reading the file. Contract under test: any byte string is accepted or refused with an
// ember::Error; it never crashes, hangs, reads out of bounds or allocates from an unchecked
// size. An accepted manifest must also be canonical-stable: its to_json() text parses back
// to a manifest with the same text (what `kv verify` and snapshot ids rely on), and the
// accessors the importer uses (payload_bytes, target_fields) run on it.
// Seeds: fuzz/corpus/manifest/, dictionary fuzz/kv_manifest.dict.
#include <cstddef>
#include <cstdint>
#include <string>

#include "kv/snapshot.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  ember::kv::SnapshotManifest m;
  try {
    m = ember::kv::SnapshotManifest::from_json(text, "fuzz/manifest.json");
  } catch (const ember::Error&) {
    return 0;
  }
  // Accepted: the canonical text must be a fixed point of parse -> write, else a snapshot
  // written from a read manifest would change identity (snapshot_id hashes these bytes).
  const std::string canonical = m.to_json();
  const std::string again = ember::kv::SnapshotManifest::from_json(canonical, "canonical").to_json();
  if (again != canonical) __builtin_trap();
  size_t touched = size_t(m.payload_bytes() & 1);
  for (const auto& [field, value] : m.target_fields()) touched += field.size() + value.size();
  if (touched == size_t(-1)) __builtin_trap();  // keep the work observable
  return 0;
}
