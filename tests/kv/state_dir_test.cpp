// The one snapshot-directory reader and writer (kv/snapshot.h: read_state_dir,
// write_state_dir) behind every entry point, for both kinds (native and mapped), and the
// refusal of non-finite K/V wherever a cache is written or read. No model needed: the
// entry points are the library calls the commands make (kv verify: verify_snapshot, kv
// replay: open_state native, kvc pack: pack_snapshot_dir, map replay: open_state mapped), plus the
// CLI where it refuses before loading any model.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <functional>

#include "kv/kv_test_util.h"
#include "kv/kvc1_snapshot.h"
#include "kv/state.h"
#include "kv/strict_json.h"
#include "support/test_support.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace ember::test {
namespace {

namespace fs = std::filesystem;

// Geometry of every fixture: 3 layers, 2 kv heads, head_dim 8, 7 positions.
constexpr int kL = 3, kH = 2, kD = 8, kP = 7;
size_t value_index(int layer, int head, int pos, int dim) {
  return ((size_t(layer) * kH + head) * kP + pos) * kD + dim;
}

kv::KvState make_mapped(uint32_t seed = 3) {
  kv::KvState m = make_state(kL, kH, kD, kP, seed, kP + 4);
  m.provenance = test_mapping(kL, m.manifest.prefix.sha256);
  return m;
}

const kv::MappedProvenance& mapping_of(const kv::StateHeader& h) { return *h.mapping(); }

std::string write_native(const std::string& tag) {
  const std::string dir = temp_dir(tag) + "/snap";
  kv::write_state_dir(make_snapshot(kL, kH, kD, kP, 11, kP + 5), dir, false);
  return dir;
}

std::string write_mapped(const std::string& tag) {
  const std::string dir = temp_dir(tag) + "/mapped";
  write_state(make_mapped(), dir);
  return dir;
}

void read_mapped(const std::string& dir) { kv::open_state(dir, {kv::Accept::mapped}); }

// Writes `bits` at one value of a payload file and re-hashes the manifest's payload entries and
// proof blocks, so that only the finiteness rule can refuse the result.
void poison(const std::string& dir, kv::Payload p, size_t index, uint16_t bits) {
  const std::string path = dir + "/" + kv::payload_file(p);
  std::string b = slurp(path);
  b[2 * index] = char(bits & 0xff);
  b[2 * index + 1] = char(bits >> 8);
  spit(path, b);
  rehash_payloads(dir);
}

// Every entry point that reads a directory, by the command it serves.
struct EntryPoint {
  const char* name;
  std::function<std::string(const std::string& dir)> error;
};
std::vector<EntryPoint> entry_points() {
  return {
      {"kv verify", [](const std::string& d) { return kv::verify_snapshot(d).error; }},
      {"kv replay", [](const std::string& d) { return error_of([&] { kv::open_state(d); }); }},
      {"kvc pack",
       [](const std::string& d) {
         const std::string out = d + ".kvc";
         std::string e = error_of([&] { kv::pack_snapshot_dir(d, out, false); });
         if (!e.empty() && path_exists(out)) e += " (and it wrote " + out + ")";
         return e;
       }},
      {"map replay", [](const std::string& d) { return error_of([&] { read_mapped(d); }); }},
  };
}

// Each entry point refuses `dir` naming `needle`, whichever kind the fixture is: the entries
// and the manifest are checked before the kind.
void expect_refused_everywhere(const std::string& dir, const std::string& needle) {
  for (const EntryPoint& e : entry_points()) {
    const std::string err = e.error(dir);
    EXPECT_NE(err.find(needle), std::string::npos) << e.name << " on " << dir << ": '" << err << "'";
  }
}

// ---- the reader, on every entry point ---------------------------------------------------------

TEST(StateDir, SymlinkedPayloadIsRefusedByEveryEntryPoint) {
  for (bool mapped : {false, true}) {
    const std::string dir = mapped ? write_mapped("link-m") : write_native("link-n");
    fs::rename(dir + "/values.f16le", dir + "/../elsewhere");
    fs::create_symlink("../elsewhere", dir + "/values.f16le");
    expect_refused_everywhere(dir, "values.f16le: payload.values: expected a regular file, found a symbolic link");
  }
}

TEST(StateDir, StrayEntryIsRefusedByEveryEntryPoint) {
  for (bool mapped : {false, true}) {
    const std::string dir = mapped ? write_mapped("stray-m") : write_native("stray-n");
    spit(dir + "/notes.txt", "x");
    expect_refused_everywhere(dir, "unexpected entry 'notes.txt'");
  }
}

TEST(StateDir, FifoPayloadIsRefusedWithoutBlocking) {
  for (bool mapped : {false, true}) {
    const std::string dir = mapped ? write_mapped("fifo-m") : write_native("fifo-n");
    fs::remove(dir + "/keys.f16le");
    ASSERT_EQ(::mkfifo((dir + "/keys.f16le").c_str(), 0600), 0);
    expect_refused_everywhere(dir, "keys.f16le: payload.keys: expected a regular file, found a FIFO");
  }
}

TEST(StateDir, SymlinkedManifestIsRefused) {
  const std::string dir = write_native("link-manifest");
  fs::rename(dir + "/manifest.json", dir + "/../manifest.json");
  fs::create_symlink("../manifest.json", dir + "/manifest.json");
  expect_refused_everywhere(dir, "manifest.json: manifest: expected a regular file, found a symbolic link");
}

TEST(StateDir, MappedManifestWithoutMappingIsRefusedByEveryEntryPoint) {
  const std::string dir = write_mapped("drop-mapping");
  edit_manifest(dir, [](auto& j) { j.erase("mapping"); });
  expect_refused_everywhere(dir, "manifest.json: mapping: expected present, found missing");
}

TEST(StateDir, NativeManifestWithAMappingIsRefused) {
  const std::string dir = write_native("add-mapping");
  edit_manifest(dir, [](auto& j) { j["mapping"] = mapping_of(make_mapped()).to_json(); });
  expect_refused_everywhere(dir, "manifest.json: mapping: expected no such key");
}

TEST(StateDir, EachKindIsRefusedByNameWhereOnlyTheOtherIsAccepted) {
  const std::string native = write_native("kind-n"), mapped = write_mapped("kind-m");
  for (const EntryPoint& e : entry_points()) {
    if (std::string(e.name) == "kvc pack") {  // KVC1 holds either kind (its kind byte says which)
      EXPECT_EQ(e.error(mapped), "");
      EXPECT_EQ(e.error(native), "");
      continue;
    }
    const bool wants_mapped = std::string(e.name) == "map replay";
    const std::string err = e.error(wants_mapped ? native : mapped);
    EXPECT_NE(err.find(wants_mapped ? "expected ember.kv-mapped (a mapped cache), found 'ember.kv-snapshot'"
                                    : "expected ember.kv-snapshot (a native snapshot), found 'ember.kv-mapped'"),
              std::string::npos)
        << e.name << ": " << err;
    EXPECT_EQ(e.error(wants_mapped ? mapped : native), "") << e.name;
  }
}

TEST(StateDir, MappingIsReadStrictly) {
  struct Case {
    const char* needle;
    std::function<void(kv::ordered_json&)> edit;
  };
  const std::vector<Case> cases = {
      {"mapping.extra: expected no such key", [](auto& j) { j["mapping"]["extra"] = 1; }},
      {"mapping.anchor: expected present, found missing", [](auto& j) { j["mapping"].erase("anchor"); }},
      {"mapping.anchor: expected an integer in [1, 3]", [](auto& j) { j["mapping"]["anchor"] = 4; }},
      {"mapping.kind: expected one of identity|ridge|affine|hybrid", [](auto& j) { j["mapping"]["kind"] = "magic"; }},
      {"mapping.layer_roles: expected 3 entries", [](auto& j) { j["mapping"]["layer_roles"].push_back("mapped"); }},
      {"mapping.layer_roles[1]: expected one of", [](auto& j) { j["mapping"]["layer_roles"][1] = "guessed"; }},
      {"mapping.mapper_hash: expected the mapper's hash", [](auto& j) { j["mapping"]["mapper_hash"] = ""; }},
      {"mapping.shared_layers: expected an integer", [](auto& j) { j["mapping"]["shared_layers"] = "1"; }},
      // Written before the relation label: refused by name, not read with a guessed label.
      {"mapping.relation: expected quantization-boundary, same-base or cross-model (mapped caches written before "
       "the relation label are refused",
       [](auto& j) { j["mapping"].erase("relation"); }},
      {"mapping.relation: expected one of quantization-boundary|same-base|cross-model",
       [](auto& j) { j["mapping"]["relation"] = "similar"; }},
  };
  for (const auto& c : cases) {
    const std::string dir = write_mapped("mapping-strict");
    edit_manifest(dir, c.edit);
    const std::string err = error_of([&] { read_mapped(dir); });
    EXPECT_NE(err.find(c.needle), std::string::npos) << c.needle << ": " << err;
  }
}

// ---- the writer: mapped caches are the native format plus the extension, canonical -------

TEST(StateDir, MappedCacheRoundTripsAndItsManifestIsCanonical) {
  const std::string dir = write_mapped("mapped-rt");
  const kv::KvState want = make_mapped();
  const kv::VerifiedState got = kv::open_state(dir, {kv::Accept::mapped});
  EXPECT_EQ(mapping_of(got.header()).to_json(), mapping_of(want).to_json());
  ASSERT_EQ(got.cache().n_pos, kP);
  for (int l = 0; l < kL; ++l)
    for (int h = 0; h < kH; ++h)
      for (int p = 0; p < kP; ++p)
        for (int d = 0; d < kD; ++d) ASSERT_EQ(got.cache().k_row(l, h, p)[d], want.cache.k_row(l, h, p)[d]);
  const std::string text = slurp(dir + "/manifest.json");
  EXPECT_EQ(text, kv::state_manifest_json(got.header(), "test"));
  EXPECT_EQ(text, got.manifest_text());
  // The native manifest's canonical bytes with format replaced, then "mapping", then the seal
  // of the whole (kv/seal.h) last.
  std::string native = got.manifest().to_json();
  native.replace(native.find("\"ember.kv-snapshot\""), 19, "\"ember.kv-mapped\"");
  native.resize(native.rfind(",\n  \"seal\""));
  EXPECT_EQ(text.rfind(native + ",\n  \"mapping\": {\n    \"kind\": \"ridge\",", 0), 0u) << text;
  const std::string seal = kv::state_seal(got.header());
  EXPECT_EQ(got.manifest().seal, seal);
  const std::string tail = ",\n  \"seal\": \"" + seal + "\"\n}\n";
  EXPECT_EQ(text.substr(text.size() - tail.size()), tail) << text;
  // Payload bytes are exactly what a native snapshot of the same cache holds.
  kv::KvState s;
  s.manifest = want.manifest;
  s.cache = want.cache.copy();
  const std::string ndir = temp_dir("mapped-rt-native") + "/snap";
  write_state(std::move(s), ndir);
  for (const char* f : {"keys.f16le", "values.f16le"}) EXPECT_EQ(slurp(dir + "/" + f), slurp(ndir + "/" + f)) << f;
  // Writing what was read gives the same bytes again.
  const std::string dir2 = temp_dir("mapped-rt2") + "/mapped";
  kv::write_state_dir(got, dir2, false);
  for (const char* f : {"manifest.json", "keys.f16le", "values.f16le"})
    EXPECT_EQ(slurp(dir + "/" + f), slurp(dir2 + "/" + f)) << f;
}

TEST(StateDir, TamperedMappedPayloadIsRefusedByHash) {
  const std::string dir = write_mapped("mapped-flip");
  std::string b = slurp(dir + "/values.f16le");
  b[5] ^= 1;
  spit(dir + "/values.f16le", b);
  EXPECT_NE(error_of([&] { read_mapped(dir); }).find("values.f16le: proof.blocks[0]"), std::string::npos);
}

// ---- defect 7: non-finite K/V --------------------------------------------------------------

TEST(NonFinite, NanWithAMatchingHashIsRefusedByVerifyReplayAndPack) {
  const std::string dir = write_native("nan");
  poison(dir, kv::Payload::keys, value_index(1, 0, 3, 5), 0x7e00);
  const std::string needle =
      "keys.f16le: payload.keys: expected finite f16 values (exponent bits not all ones), found NaN (f16 0x7e00) "
      "at layer 1, kv_head 0, position 3, dim 5";
  for (const EntryPoint& e : entry_points()) {
    if (std::string(e.name) == "map replay") continue;  // native fixture: refused by kind
    const std::string err = e.error(dir);
    EXPECT_NE(err.find(needle), std::string::npos) << e.name << ": " << err;
  }
  const kv::VerifyReport r = kv::verify_snapshot(dir);
  ASSERT_EQ(r.checks.size(), 9u);
  EXPECT_EQ(r.checks[4].name, "proof.blocks");
  EXPECT_EQ(r.checks[4].status, "ok");
  EXPECT_EQ(r.checks[5].name, "payload.keys.sha256");
  EXPECT_EQ(r.checks[5].status, "ok");  // the hash matches: only finiteness can catch it
  EXPECT_EQ(r.checks[6].name, "payload.keys.finite");
  EXPECT_EQ(r.checks[6].status, "failed");
  // The commands: verify exits 1; replay refuses the state before it imports it into the model
  // (the model is loaded first, to bound the positions by its context, but nothing is decoded).
  std::string out;
  EXPECT_EQ(run_command(ember_binary() + " kv verify " + dir, &out), 1) << out;
  EXPECT_NE(out.find("found NaN (f16 0x7e00) at layer 1, kv_head 0, position 3, dim 5"), std::string::npos) << out;
  EXPECT_NE(run_command(ember_binary() + " kv replay --model " + shared_path("models/stories260K.gguf") + " --snapshot " + dir, &out), 0);
  EXPECT_NE(out.find(needle), std::string::npos) << out;
  EXPECT_NE(run_command(ember_binary() + " kvc pack " + dir + " " + dir + "-cli.kvc", &out), 0);
  EXPECT_FALSE(path_exists(dir + "-cli.kvc"));
}

TEST(NonFinite, InfInAMappedCacheIsRefusedByMapReplay) {
  const std::string dir = write_mapped("inf-mapped");
  poison(dir, kv::Payload::values, value_index(2, 1, 6, 7), 0xfc00);
  const std::string err = error_of([&] { read_mapped(dir); });
  EXPECT_NE(err.find("values.f16le: payload.values: expected finite f16 values (exponent bits not all ones), "
                     "found -Inf (f16 0xfc00) at layer 2, kv_head 1, position 6, dim 7"),
            std::string::npos)
      << err;
  std::string out;
  EXPECT_NE(run_command(ember_binary() + " map replay --mapped " + dir + " --model " + dir + "/absent.gguf", &out), 0);
  EXPECT_NE(out.find("found -Inf (f16 0xfc00) at layer 2"), std::string::npos) << out;
}

TEST(NonFinite, WritersRefuseAndLeaveNothing) {
  const std::string parent = temp_dir("nan-write");
  kv::KvState bad = make_state(kL, kH, kD, kP, 4, kP + 2);
  bad.cache.v_row(0, 1, 2)[3] = 0x7c00;  // +Inf
  const kv::VerifiedState s = kv::seal(std::move(bad), "test");  // a seal over the bad bytes
  EXPECT_FALSE(s.finite());  // only the finiteness rule refuses
  const std::string needle = "found +Inf (f16 0x7c00) at layer 0, kv_head 1, position 2, dim 3";
  EXPECT_NE(error_of([&] { kv::write_state_dir(s, parent + "/snap", false); }).find(needle), std::string::npos);
  EXPECT_NE(error_of([&] { kv::write_state_kvc1(s, parent + "/s.kvc", false); }).find(needle), std::string::npos);
  kv::KvState m = make_mapped();
  m.cache.k_row(1, 0, 0)[0] = 0xffff;  // a NaN with the sign bit set
  EXPECT_NE(error_of([&] { write_state(std::move(m), parent + "/mapped"); })
                .find("found NaN (f16 0xffff) at layer 1, kv_head 0, position 0, dim 0"),
            std::string::npos);
  EXPECT_TRUE(fs::is_empty(parent));
}

// A KVC1 file whose state hashes match NaN payloads (written with the container's low-level
// writer, since ember's own writers refuse them).
std::string write_nan_kvc1(const std::string& path, const kv::KvState& s) {
  std::vector<kv::Kvc1TensorSource> src;
  const size_t per_layer = size_t(kH) * kP * kD;
  for (uint32_t i = 0; i < 2 * kL; ++i) {
    kv::Kvc1TensorSource t;
    t.layer = i / 2;
    t.is_value = i % 2;
    t.shape[0] = kH; t.shape[1] = kP; t.shape[2] = kD;
    const uint16_t* p = (i % 2 ? s.cache.v.data() : s.cache.k.data()) + per_layer * (i / 2);
    t.emit = [p, per_layer](ByteSink& out) { out.write(p, per_layer * 2); };
    src.push_back(t);
  }
  kv::write_kvc1_file(path, kv::kvc1_state_header(s), src, false);
  return path;
}

TEST(NonFinite, Kvc1ReaderAndUnpackRefuseAndCompareMayOptIn) {
  const std::string dir = temp_dir("nan-kvc1");
  kv::KvState bad = make_state(kL, kH, kD, kP, 8);  // capacity == positions: tensors are contiguous
  bad.cache.k_row(2, 1, 4)[6] = 0x7e01;
  const kv::VerifiedState s = kv::seal(std::move(bad), "test");
  const std::string kvc = write_nan_kvc1(dir + "/nan.kvc", s.state());
  const std::string needle = "nan.kvc: state.keys: expected finite f16 values (exponent bits not all ones), found "
                             "NaN (f16 0x7e01) at layer 2, kv_head 1, position 4, dim 6";
  EXPECT_NE(error_of([&] { kv::open_state(kvc); }).find(needle), std::string::npos);
  EXPECT_NE(error_of([&] { kv::unpack_kvc1(kvc, dir + "/out", false); }).find(needle), std::string::npos);
  EXPECT_FALSE(path_exists(dir + "/out"));
  const kv::VerifiedState allowed = kv::open_state(kvc, {kv::Accept::native, /*allow_non_finite=*/true});
  EXPECT_EQ(allowed.cache().k_row(2, 1, 4)[6], 0x7e01);
  EXPECT_FALSE(allowed.finite());
}

TEST(NonFinite, CompareRefusesUnlessAllowed) {
  const std::string good = write_native("cmp-good");
  const std::string bad = temp_dir("cmp-bad") + "/snap";
  fs::copy(good, bad, fs::copy_options::recursive);
  poison(bad, kv::Payload::values, value_index(0, 0, 0, 1), 0x7e00);
  std::string out;
  EXPECT_EQ(run_command(ember_binary() + " kv compare " + good + " " + bad, &out), 2) << out;
  EXPECT_NE(out.find("payload.values: expected finite f16 values"), std::string::npos) << out;
  EXPECT_EQ(run_command(ember_binary() + " kv compare " + good + " " + bad + " --allow-non-finite --json", &out), 0)
      << out;
  EXPECT_NE(out.find("--allow-non-finite"), std::string::npos) << out;  // the stderr note
  EXPECT_NE(out.find("\"non_finite\": 1"), std::string::npos) << out;
  // The opt-in loosens nothing else: a flipped bit is still refused.
  std::string b = slurp(bad + "/keys.f16le");
  b[0] ^= 1;
  spit(bad + "/keys.f16le", b);
  EXPECT_NE(run_command(ember_binary() + " kv compare " + good + " " + bad + " --allow-non-finite", &out), 0);
  EXPECT_NE(out.find("proof.blocks[0]"), std::string::npos) << out;
}

TEST(NonFinite, CheckSpansSplitWrites) {
  // A value whose two bytes arrive in separate writes is still checked, at the right place.
  kv::SnapshotManifest m;
  m.geometry = kv::Geometry{1, 1, 4, 2};
  kv::PayloadCheck c(m);
  const uint8_t bytes[] = {0, 0, 0, 0, 0, 0, 0x00, 0x7c};  // value 3 = +Inf
  c.write(bytes, 7);
  EXPECT_EQ(c.first_non_finite(), "");
  c.write(bytes + 7, 1);
  EXPECT_EQ(c.first_non_finite(), "+Inf (f16 0x7c00) at layer 0, kv_head 0, position 0, dim 3");
  EXPECT_EQ(c.n_bytes(), 8u);
}

}  // namespace
}  // namespace ember::test
