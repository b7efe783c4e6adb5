// Fail-closed import checks (model-independent part; describe_target is in target.cpp).
#include "kv/import.h"

#include "util/error.h"
#include "util/sha256.h"

namespace ember::kv {

void check_compatible(const SnapshotManifest& snapshot, const SnapshotManifest& target,
                      const std::string& where) {
  const auto have = snapshot.target_fields();
  const auto want = target.target_fields();
  EMBER_CHECK(have.size() == want.size());
  for (size_t i = 0; i < have.size(); ++i) {
    EMBER_CHECK(have[i].first == want[i].first);
    if (have[i].second != want[i].second)
      fail_field(where, have[i].first, want[i].second + " (target)", have[i].second + " (snapshot)");
  }
}

void check_payload_hashes(const Snapshot& s, const std::string& where) {
  const model::KvCache& c = s.cache;
  const Geometry& g = s.manifest.geometry;
  if (c.n_layers != g.layers || c.n_kv_heads != g.kv_heads || c.head_dim != g.head_dim ||
      c.n_pos != g.positions || c.capacity < c.n_pos ||
      c.k.size() != size_t(c.n_layers) * c.n_kv_heads * c.capacity * c.head_dim || c.v.size() != c.k.size())
    fail_field(where, "cache", "the geometry of the manifest", "a cache of another shape");
  const size_t row = size_t(c.n_pos) * size_t(c.head_dim) * sizeof(uint16_t);
  for (bool k : {true, false}) {
    Sha256 h;
    for (int l = 0; l < c.n_layers; ++l)
      for (int hd = 0; hd < c.n_kv_heads; ++hd) h.update(k ? c.k_row(l, hd, 0) : c.v_row(l, hd, 0), row);
    const std::string got = to_hex(h.finish());
    const std::string& want = (k ? s.manifest.keys : s.manifest.values).sha256;
    if (got != want)
      fail_field(where, k ? "payload.keys.sha256" : "payload.values.sha256", want + " (manifest)",
                 got + " (cache bytes)");
  }
}

model::KvCache import_checked(const Snapshot& s, const SnapshotManifest& target, int extra_capacity,
                              const std::string& where) {
  check_compatible(s.manifest, target, where);
  check_payload_hashes(s, where);
  if (extra_capacity < 0 || extra_capacity > kMaxPositions)
    fail_field(where, "extra capacity", "0.." + std::to_string(kMaxPositions), std::to_string(extra_capacity));
  const model::KvCache& c = s.cache;
  model::KvCache out(c.n_layers, c.n_kv_heads, c.head_dim, c.n_pos + extra_capacity);
  out.copy_prefix(c, c.n_pos);
  out.n_pos = c.n_pos;
  return out;
}

}  // namespace ember::kv
