// libFuzzer target for the snapshot-directory manifest reader (README "Fuzzing"): the bytes of
// one input are the text of a manifest.json, fed to kv::parse_state_manifest, the in-memory
// entry point that read_state_dir (and so read_snapshot, verify_snapshot, read_mapped_state,
// kvc pack and map replay) calls after reading the file, for both kinds (ember.kv-snapshot
// and ember.kv-mapped with its "mapping" extension). Contract under test: any byte string is
// accepted or refused with an ember::Error; it never crashes, hangs, reads out of bounds or
// allocates from an unchecked size. An accepted manifest must also be canonical-stable: its
// state_manifest_json() text parses back to a manifest with the same text (what `kv verify`
// and snapshot ids rely on), and the accessors the importer uses (payload_bytes,
// target_fields) run on it.
// Seeds: fuzz/corpus/manifest/, dictionary fuzz/kv_manifest.dict.
#include <cstddef>
#include <cstdint>
#include <string>

#include "kv/state.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  using ember::kv::parse_state_manifest;
  using ember::kv::state_manifest_json;
  ember::kv::StateHeader s;
  try {
    s = parse_state_manifest(text, "fuzz/manifest.json");
  } catch (const ember::Error&) {
    return 0;
  }
  // Accepted: the canonical text must be a fixed point of parse -> write, else a snapshot
  // written from a read manifest would change identity (snapshot_id hashes these bytes).
  const std::string canonical = state_manifest_json(s, "canonical");
  const ember::kv::StateHeader back = parse_state_manifest(canonical, "canonical");
  if (back.kind() != s.kind()) __builtin_trap();
  if (state_manifest_json(back, "again") != canonical) __builtin_trap();
  const ember::kv::SnapshotManifest& m = s.manifest;
  size_t touched = size_t(m.payload_bytes() & 1);
  for (const auto& [field, value] : m.target_fields()) touched += field.size() + value.size();
  if (touched == size_t(-1)) __builtin_trap();  // keep the work observable
  return 0;
}
