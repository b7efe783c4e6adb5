// Fail-closed import checks (model-independent part; describe_target is in target.cpp).
#include "kv/import.h"

#include "util/error.h"

namespace ember::kv {

namespace {

// What a person recognizes beside a model identity hash: the architecture and the weight types
// the engine fingerprint records ("canonical-v1;weights=q8_0,f32;...").
std::string model_summary(const SnapshotManifest& m) {
  std::string s = m.model.architecture.empty() ? "?" : m.model.architecture;
  const std::string& fp = m.numerics.engine_fingerprint;
  const size_t w = fp.find("weights=");
  if (w != std::string::npos) s += ", weights " + fp.substr(w + 8, fp.find(';', w) - (w + 8));
  s += ", " + std::to_string(m.geometry.layers) + " layers";
  return s;
}

}  // namespace

void check_compatible(const SnapshotManifest& snapshot, const SnapshotManifest& target,
                      const std::string& where, bool allow_foreign) {
  const auto have = snapshot.target_fields();
  const auto want = target.target_fields();
  EMBER_CHECK(have.size() == want.size());
  const bool skip_numerics = allow_foreign && snapshot.numerics.contract == kForeignContract;
  for (size_t i = 0; i < have.size(); ++i) {
    EMBER_CHECK(have[i].first == want[i].first);
    if (skip_numerics && have[i].first.rfind("numerics.", 0) == 0) continue;
    if (have[i].second == want[i].second) continue;
    if (have[i].first == "model.identity")  // a hash alone says nothing a person can act on
      fail_field(where, have[i].first, want[i].second + " (target: " + model_summary(target) + ")",
                 have[i].second + " (snapshot: " + model_summary(snapshot) + ")");
    fail_field(where, have[i].first, want[i].second + " (target)", have[i].second + " (snapshot)");
  }
}

namespace {

void check_import(const VerifiedState& s, const SnapshotManifest& target, int extra_capacity, const std::string& where,
                  bool allow_foreign) {
  check_compatible(s.manifest(), target, where, allow_foreign);
  if (!s.finite())
    fail_field(where, "payload", "finite f16 values", "non-finite values (read with --allow-non-finite)");
  if (extra_capacity < 0 || extra_capacity > kMaxPositions)
    fail_field(where, "extra capacity", "0.." + std::to_string(kMaxPositions), std::to_string(extra_capacity));
}

}  // namespace

model::KvCache import_checked(const VerifiedState& s, const SnapshotManifest& target, int extra_capacity,
                              const std::string& where, bool allow_foreign) {
  check_import(s, target, extra_capacity, where, allow_foreign);
  const model::KvCache& c = s.cache();
  return c.copy_rows(c.n_pos, extra_capacity);
}

model::KvCache import_checked(VerifiedState&& s, const SnapshotManifest& target, int extra_capacity,
                              const std::string& where, bool allow_foreign) {
  check_import(s, target, extra_capacity, where, allow_foreign);
  if (s.cache().capacity < s.cache().n_pos + extra_capacity)
    return import_checked(static_cast<const VerifiedState&>(s), target, extra_capacity, where, allow_foreign);
  return std::move(std::move(s).release().cache);
}

}  // namespace ember::kv
