// snapshot -> KVC1 -> snapshot is byte-identical; a KVC1 loads as the same state; the
// state-level rejections (mapped artifact, state hash, manifest rules) are named.
#include <gtest/gtest.h>

#include <cstring>

#include "kv/kv_test_util.h"
#include "kv/kvc1_snapshot.h"
#include "kv/state.h"
#include "support/test_support.h"
#include "util/atomic_file.h"

namespace ember::kv {
namespace {

using nlohmann::json;

std::string file(const std::string& dir, const char* name) { return test::slurp(dir + "/" + name); }

// Rewrites the trailer so that only the edited field can be what the reader refuses.
void fix_trailer(std::string& b) {
  const std::string h = sha256_hex(b.data(), b.size() - 32);
  for (size_t i = 0; i < 32; ++i) b[b.size() - 32 + i] = char(std::stoi(h.substr(2 * i, 2), nullptr, 16));
}

Kvc1Reject reject_code(const std::string& path) {
  try {
    read_kvc1_state(path, {Accept::native});
  } catch (const Kvc1Error& e) {
    return e.code();
  }
  ADD_FAILURE() << path << " accepted";
  return Kvc1Reject::truncated;
}

TEST(Kvc1Snapshot, SnapshotToKvc1ToSnapshotIsByteIdentical) {
  const std::string dir = test::temp_dir("kvc1snap");
  const VerifiedState s = test::make_snapshot(3, 2, 8, 7, /*seed=*/5, /*capacity=*/11);
  write_state_dir(s, dir + "/a", false);
  pack_snapshot_dir(dir + "/a", dir + "/a.kvc", false);
  unpack_kvc1(dir + "/a.kvc", dir + "/b", false);
  for (const char* f : {kManifestFile, kKeysFile, kValuesFile})
    EXPECT_EQ(file(dir + "/a", f), file(dir + "/b", f)) << f;
  // From memory (capacity > positions) gives the same container bytes as from the directory.
  write_state_kvc1(s, dir + "/m.kvc", false);
  EXPECT_EQ(test::slurp(dir + "/a.kvc"), test::slurp(dir + "/m.kvc"));
  // And packing the unpacked snapshot again reproduces the container.
  pack_snapshot_dir(dir + "/b", dir + "/b.kvc", false);
  EXPECT_EQ(test::slurp(dir + "/a.kvc"), test::slurp(dir + "/b.kvc"));
  EXPECT_THROW(pack_snapshot_dir(dir + "/a", dir + "/a.kvc", false), Error);  // no --force
}

TEST(Kvc1Snapshot, LoadStateAcceptsAKvc1LikeADirectory) {
  const std::string dir = test::temp_dir("kvc1snap");
  const VerifiedState s = test::make_snapshot(2, 2, 4, 5);
  write_state_dir(s, dir + "/a", false);
  write_state_kvc1(s, dir + "/a.kvc", false);
  const VerifiedState from_dir = open_state(dir + "/a");
  const VerifiedState from_kvc = open_state(dir + "/a.kvc");
  EXPECT_EQ(from_kvc.manifest().to_json(), from_dir.manifest().to_json());
  EXPECT_EQ(from_kvc.manifest_text(), from_dir.manifest_text());
  EXPECT_EQ(from_kvc.cache().k, from_dir.cache().k);
  EXPECT_EQ(from_kvc.cache().v, from_dir.cache().v);
  EXPECT_EQ(from_kvc.cache().n_pos, 5);
}

TEST(Kvc1Snapshot, CorruptSnapshotIsNotPacked) {
  const std::string dir = test::temp_dir("kvc1snap");
  write_state_dir(test::make_snapshot(2, 2, 4, 5), dir + "/a", false);
  std::string keys = file(dir + "/a", kKeysFile);
  keys[17] ^= 4;
  test::spit(dir + "/a/" + kKeysFile, keys);
  EXPECT_THROW(pack_snapshot_dir(dir + "/a", dir + "/a.kvc", false), Error);
  EXPECT_FALSE(path_exists(dir + "/a.kvc"));
}

TEST(Kvc1Snapshot, StateLevelRejectionsAreNamed) {
  const std::string dir = test::temp_dir("kvc1snap");
  const VerifiedState s = test::make_snapshot(2, 2, 4, 5);
  write_state_kvc1(s, dir + "/a.kvc", false);
  const std::string ok = test::slurp(dir + "/a.kvc");
  // Replaces `from` by `to` (and, when given, the state's seal by the one the edit implies,
  // so that the seal is not what refuses it), then fixes the trailer.
  auto edited = [&](const std::string& from, const std::string& to, const char* name,
                    const std::string& reseal_from = "", const std::string& reseal_to = "") {
    std::string b = ok;
    for (const auto& [f, t] : {std::pair{from, to}, std::pair{reseal_from, reseal_to}}) {
      if (f.empty()) continue;
      const size_t at = b.find(f);
      EXPECT_NE(at, std::string::npos) << f;
      EXPECT_EQ(f.size(), t.size());
      b.replace(at, f.size(), t);
    }
    fix_trailer(b);
    const std::string p = dir + "/" + name;
    test::spit(p, b);
    return p;
  };
  // The keys hash in the state no longer matches the K payloads.
  const std::string kh = s.manifest().keys.sha256;
  std::string other = kh;
  other[0] = other[0] == '0' ? '1' : '0';
  StateHeader m2 = s.header();
  m2.manifest.keys.sha256 = other;
  EXPECT_EQ(reject_code(edited(kh, other, "h.kvc", state_seal(s.header()), state_seal(m2))),
            Kvc1Reject::state_hash_mismatch);
  // The same edit without the seal recomputed is a manifest edit, refused by the seal.
  EXPECT_EQ(reject_code(edited(kh, other, "unsealed.kvc")), Kvc1Reject::bad_header);
  // Issue 12, defect 11: `kvc inspect` printed the table of such a file and exited 0. It still
  // prints the table (it is what a user inspects), then exits 1 naming the mismatch.
  std::string out;
  EXPECT_EQ(test::run_command(test::ember_binary() + " kvc inspect " + dir + "/h.kvc", &out), 1) << out;
  EXPECT_NE(out.find("state.keys.sha256"), std::string::npos) << out;
  EXPECT_NE(out.find("layer"), std::string::npos) << out;
  EXPECT_EQ(test::run_command(test::ember_binary() + " kvc inspect " + dir + "/h.kvc --json", &out), 1) << out;
  // A manifest rule (an unknown architecture) inside an otherwise valid container.
  EXPECT_EQ(reject_code(edited("\"architecture\":\"qwen2\"", "\"architecture\":\"qwen9\"", "a.kvc")),
            Kvc1Reject::bad_header);
  // Without fixing the trailer, the same edit is a trailer mismatch (checked first).
  std::string b = ok;
  b[b.find("\"qwen2\"") + 5] = '9';
  test::spit(dir + "/t.kvc", b);
  EXPECT_EQ(reject_code(dir + "/t.kvc"), Kvc1Reject::trailer_hash_mismatch);
}

TEST(Kvc1Snapshot, MappedCachePacksUnpacksByteIdenticalAndIsNeverNative) {
  const std::string dir = test::temp_dir("kvc1mapped");
  const VerifiedState m = seal(test::make_mapped_state(3, 2, 4, 5), "test");
  write_state_dir(m, dir + "/m", false);
  pack_snapshot_dir(dir + "/m", dir + "/m.kvc", false);
  const Kvc1File f = Kvc1File::open(dir + "/m.kvc");
  EXPECT_EQ(f.kind(), Kvc1Kind::mapped);
  EXPECT_EQ(f.state()["format"], kMappedFormat);
  EXPECT_EQ(f.state()["mapping"]["mapper_hash"], m.header().mapping()->mapper_hash);  // provenance travels, sealed
  unpack_kvc1(dir + "/m.kvc", dir + "/back", false);
  for (const char* n : {kManifestFile, kKeysFile, kValuesFile}) EXPECT_EQ(file(dir + "/m", n), file(dir + "/back", n)) << n;
  // The mapped reader takes the .kvc like the directory; every native reader refuses it by kind.
  const VerifiedState r = open_state(dir + "/m.kvc", {Accept::mapped});
  EXPECT_EQ(r.header().mapping()->layer_roles, m.header().mapping()->layer_roles);
  EXPECT_EQ(r.cache().k, open_state(dir + "/m", {Accept::mapped}).cache().k);
  const std::string want = "m.kvc: artifact.kind: expected native (the state this command reads), found \"mapped\"";
  EXPECT_NE(test::error_of([&] { open_state(dir + "/m.kvc"); }).find(want), std::string::npos)
      << test::error_of([&] { open_state(dir + "/m.kvc"); });
  EXPECT_NE(test::error_of([&] { read_kvc1_state(dir + "/m.kvc", {Accept::native}); }).find(want), std::string::npos);
  // And a native .kvc is refused by the mapped reader, by kind.
  write_state_kvc1(test::make_snapshot(2, 2, 4, 5), dir + "/n.kvc", false);
  EXPECT_NE(test::error_of([&] { open_state(dir + "/n.kvc", {Accept::mapped}); }).find("found \"native\""),
            std::string::npos);
}

TEST(Kvc1Snapshot, KindAndStateFormatMustAgree) {
  const std::string dir = test::temp_dir("kvc1kindstate");
  // A native manifest under a mapped label (both byte and field, consistently re-hashed): a
  // well-formed container whose state is not what its kind says.
  const VerifiedState v = test::make_snapshot(2, 2, 4, 5);
  const KvState& s = v.state();
  json h = kvc1_state_header(s);
  h["artifact"]["kind"] = "mapped";
  std::vector<Kvc1TensorSource> src;
  const size_t per_layer = size_t(2) * 5 * 4;
  for (uint32_t i = 0; i < 4; ++i) {
    Kvc1TensorSource t;
    t.layer = i / 2;
    t.is_value = i % 2;
    t.shape[0] = 2; t.shape[1] = 5; t.shape[2] = 4;
    const uint16_t* p = (i % 2 ? s.cache.v.data() : s.cache.k.data()) + per_layer * (i / 2);
    t.emit = [p, per_layer](ByteSink& out) { out.write(p, per_layer * 2); };
    src.push_back(t);
  }
  write_kvc1_file(dir + "/x.kvc", h, src, false);
  EXPECT_EQ(Kvc1File::open(dir + "/x.kvc").kind(), Kvc1Kind::mapped);
  const std::string e = test::error_of([&] { read_kvc1_state(dir + "/x.kvc", {Accept::any}); });
  EXPECT_NE(e.find("[bad-header] state.format: expected ember.kv-mapped (artifact.kind \"mapped\")"), std::string::npos) << e;
  EXPECT_THROW(unpack_kvc1(dir + "/x.kvc", dir + "/out", false), Kvc1Error);
  EXPECT_FALSE(path_exists(dir + "/out"));
}

TEST(Kvc1Snapshot, CliPacksAMappedCacheAndKvReplayRefusesItByKind) {
  const std::string dir = test::temp_dir("kvc1mappedcli");
  test::write_state(test::make_mapped_state(2, 2, 4, 5), dir + "/m");
  const std::string ember = test::ember_binary();
  std::string out;
  ASSERT_EQ(test::run_command(ember + " kvc pack " + dir + "/m " + dir + "/m.kvc", &out), 0) << out;
  ASSERT_EQ(test::run_command(ember + " kvc verify " + dir + "/m.kvc", &out), 0) << out;
  EXPECT_NE(out.find("mapped"), std::string::npos) << out;
  ASSERT_EQ(test::run_command(ember + " kvc inspect " + dir + "/m.kvc", &out), 0) << out;
  EXPECT_NE(out.find("artifact mapped"), std::string::npos) << out;
  ASSERT_EQ(test::run_command(ember + " kvc unpack " + dir + "/m.kvc " + dir + "/b", &out), 0) << out;
  EXPECT_EQ(file(dir + "/m", kManifestFile), file(dir + "/b", kManifestFile));
  EXPECT_EQ(file(dir + "/m", kKeysFile), file(dir + "/b", kKeysFile));
  // kv replay reads the state before any decode and refuses the mapped kind by name (the
  // model is real so that the refusal cannot be a model-loading error).
  const std::string model = test::shared_path("models/stories260K.gguf");
  EXPECT_NE(test::run_command(ember + " kv replay --snapshot " + dir + "/m.kvc --model " + model + " -n 2", &out), 0);
  EXPECT_NE(out.find("artifact.kind: expected native"), std::string::npos) << out;
  EXPECT_NE(out.find("\"mapped\""), std::string::npos) << out;
}

TEST(Kvc1Snapshot, CliVerifyInspectAndExitCodes) {
  const std::string dir = test::temp_dir("kvc1cli");
  write_state_dir(test::make_snapshot(2, 2, 4, 5), dir + "/a", false);
  const std::string ember = test::ember_binary();
  std::string out;
  ASSERT_EQ(test::run_command(ember + " kvc pack " + dir + "/a " + dir + "/a.kvc", &out), 0) << out;
  ASSERT_EQ(test::run_command(ember + " kvc verify " + dir + "/a.kvc", &out), 0) << out;
  ASSERT_EQ(test::run_command(ember + " kvc inspect " + dir + "/a.kvc --json", &out), 0) << out;
  EXPECT_NE(out.find("\"tensors\""), std::string::npos);
  std::string b = test::slurp(dir + "/a.kvc");
  b.push_back('\0');
  test::spit(dir + "/bad.kvc", b);
  EXPECT_EQ(test::run_command(ember + " kvc verify " + dir + "/bad.kvc", &out), 1) << out;
  EXPECT_NE(out.find("[trailing-bytes]"), std::string::npos) << out;
  // kv compare accepts a .kvc wherever it accepts a snapshot directory (kv::open_state).
  ASSERT_EQ(test::run_command(ember + " kv compare " + dir + "/a " + dir + "/a.kvc --max-abs 0", &out), 0) << out;
  ASSERT_EQ(test::run_command(ember + " kvc unpack " + dir + "/a.kvc " + dir + "/b", &out), 0) << out;
  EXPECT_EQ(file(dir + "/a", kKeysFile), file(dir + "/b", kKeysFile));
}

}  // namespace
}  // namespace ember::kv
