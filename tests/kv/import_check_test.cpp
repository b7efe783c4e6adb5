// Strict import without a model: every target coordinate, edited into an otherwise valid
// snapshot, is refused with one line naming the field, the expected and the found value.
#include <gtest/gtest.h>

#include <type_traits>

#include "kv/import.h"
#include "kv/kv_test_util.h"
#include "kv/strict_json.h"
#include "support/test_support.h"
#include "util/error.h"
#include "util/sha256.h"

namespace ember::test {
namespace {

using kv::SnapshotManifest;

std::string import_error(const kv::VerifiedState& s, const SnapshotManifest& target) {
  try {
    kv::import_checked(s, target, 4, "import");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SnapshotImport, AcceptsTheExactTargetAndCopiesTheCursor) {
  const kv::VerifiedState s = make_snapshot(2, 2, 4, 5);
  const model::KvCache c = kv::import_checked(s, s.manifest(), 3, "import");
  EXPECT_EQ(c.n_pos, 5);
  EXPECT_EQ(c.capacity, 8);
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < 2; ++h)
      for (int p = 0; p < 5; ++p)
        for (int d = 0; d < 4; ++d) ASSERT_EQ(c.k_row(l, h, p)[d], s.cache().k_row(l, h, p)[d]);
}

TEST(SnapshotImport, MovesAReaderCacheThatHasRoomAndHashesNothing) {
  // A state read with room for decoding becomes the engine's cache without a copy, and the
  // import hashes no payload byte (the state was verified when it was read or sealed).
  kv::VerifiedState s = kv::seal(make_state(2, 2, 4, 5, 1, /*capacity=*/8), "test");
  const uint16_t* rows = s.cache().k.data();
  const kv::SnapshotManifest target = s.manifest();
  const uint64_t before = sha256_bytes_hashed();
  const model::KvCache c = kv::import_checked(std::move(s), target, 3, "import");
  EXPECT_EQ(sha256_bytes_hashed() - before, 0u);
  EXPECT_EQ(c.k.data(), rows);
  EXPECT_EQ(c.n_pos, 5);
  EXPECT_EQ(c.capacity, 8);
}

TEST(SnapshotImport, RefusesEveryTargetFieldMismatch) {
  // Each edit is applied to the snapshot's manifest, written to disk (so it is a valid
  // snapshot of its own), read back, and imported into the unedited target.
  struct Case {
    const char* field;
    std::function<void(SnapshotManifest&)> edit;
    const char* found;
  };
  const std::vector<Case> cases = {
      {"model.identity", [](auto& m) { m.model.identity = std::string(64, 'b'); }, nullptr},
      {"model.architecture", [](auto& m) { m.model.architecture = "llama"; }, "llama (snapshot)"},
      {"tokenizer.identity", [](auto& m) { m.tokenizer.identity = std::string(64, 'c'); }, nullptr},
      {"model.vocab_size", [](auto& m) { m.model.vocab_size = 1000; }, "1000 (snapshot)"},
      {"model.embedding_size", [](auto& m) { m.model.embedding_size = 64; }, "64 (snapshot)"},
      {"model.query_heads", [](auto& m) { m.model.query_heads = 2; }, "2 (snapshot)"},
      {"rope.layout", [](auto& m) { m.rope.layout = "normal"; }, "normal (snapshot)"},
      {"rope.theta", [](auto& m) { m.rope.theta = 10000.0f; }, "10000.0 (snapshot)"},
      {"rope.scaling.type", [](auto& m) { m.rope.scaling_type = "linear"; }, "linear (snapshot)"},
      {"rope.scaling.factor", [](auto& m) { m.rope.scaling_factor = 2.0f; }, "2.0 (snapshot)"},
      {"rope.scaling.original_context", [](auto& m) { m.rope.original_context = 8192; }, nullptr},
      {"rope.scaling.low_freq_factor", [](auto& m) { m.rope.low_freq_factor = 2.0f; }, nullptr},
      {"rope.scaling.high_freq_factor", [](auto& m) { m.rope.high_freq_factor = 8.0f; }, nullptr},
      {"attention.qk_norm", [](auto& m) { m.attention.qk_norm = kv::kQkNormRmsPerHead; }, nullptr},
      {"attention.qkv_bias", [](auto& m) { m.attention.qkv_bias = false; }, "false (snapshot)"},
      {"representation.keys", [](auto& m) { m.representation.keys = kv::kKeyStatePreRope; }, "pre-rope (snapshot)"},
      {"numerics.contract", [](auto& m) { m.numerics.contract = "canonical-v2"; }, nullptr},
      {"numerics.engine_fingerprint", [](auto& m) { m.numerics.engine_fingerprint += ";x"; }, nullptr},
  };
  const kv::VerifiedState base = make_snapshot(2, 2, 4, 5);
  for (const auto& c : cases) {
    kv::KvState s = make_state(2, 2, 4, 5);
    c.edit(s.manifest);
    const std::string dir = temp_dir("edit") + "/snap";
    write_state(std::move(s), dir);
    const kv::VerifiedState r = kv::open_state(dir);
    const std::string err = import_error(r, base.manifest());
    EXPECT_EQ(err.rfind(std::string("import: ") + c.field + ": expected ", 0), 0u) << c.field << ": " << err;
    if (c.found) {
      EXPECT_NE(err.find(c.found), std::string::npos) << err;
    }
    EXPECT_EQ(err.find('\n'), std::string::npos);
  }
}

TEST(SnapshotImport, GeometryMismatchIsNamed) {
  const kv::VerifiedState target = make_snapshot(2, 2, 4, 5);
  for (auto [layers, heads, dim, field] : {std::tuple{3, 2, 4, "geometry.layers"},
                                           std::tuple{2, 1, 4, "geometry.kv_heads"},
                                           std::tuple{2, 2, 6, "geometry.head_dim"}}) {
    kv::KvState s = make_state(layers, heads, dim, 5);
    s.manifest.model = target.manifest().model;  // only the geometry differs
    s.manifest.model.query_heads = target.manifest().model.query_heads;
    if (target.manifest().model.query_heads % heads != 0) continue;
    const std::string err = import_error(kv::seal(std::move(s), "test"), target.manifest());
    EXPECT_EQ(err.rfind(std::string("import: ") + field + ": expected ", 0), 0u) << err;
  }
}

// A cache edited after reading can no longer reach an import: the import takes a verified
// state, and the only way to change one is release(), after which it must be sealed again
// (which gives it a new seal, so --expect and signatures still catch it).
static_assert(!std::is_invocable_v<decltype(static_cast<model::KvCache (*)(const kv::VerifiedState&,
                                                                           const SnapshotManifest&, int,
                                                                           const std::string&, bool)>(
                                       &kv::import_checked)),
                                   const kv::KvState&, const SnapshotManifest&, int, const std::string&, bool>);
static_assert(!std::is_constructible_v<kv::VerifiedState, kv::KvState>);

TEST(SnapshotImport, AnEditedStateIsANewStateWithANewSeal) {
  kv::KvState s = make_snapshot(2, 2, 4, 5).release();
  const std::string before = s.manifest.seal;
  s.cache.k_row(1, 0, 4)[2] ^= 0x8000;
  const kv::VerifiedState edited = kv::seal(std::move(s), "test");
  EXPECT_NE(edited.manifest().seal, before);
  EXPECT_NE(edited.manifest().keys.sha256, make_snapshot(2, 2, 4, 5).manifest().keys.sha256);
}

}  // namespace
}  // namespace ember::test
