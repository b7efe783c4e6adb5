#include "kv/mapped_state.h"

#include "kv/state_loader.h"

namespace ember::kv {

void write_mapped_state(MappedState& s, const std::string& dir, bool force, const std::string& sign_key_pem) {
  s.manifest.format = kSnapshotFormat;
  seal_manifest(s.manifest, s.cache, dir);
  if (!sign_key_pem.empty()) sign_manifest(s.manifest, &s.mapping, sign_key_pem);
  write_state_dir(s.manifest, &s.mapping, s.cache, dir, force);
}

MappedState read_mapped_state(const std::string& dir, bool allow_non_finite) {
  StateDir d = load_state_as(dir, Accept::mapped, allow_non_finite);
  return {std::move(d.header.manifest), std::move(d.cache), std::move(*d.header.mapping)};
}

}  // namespace ember::kv
