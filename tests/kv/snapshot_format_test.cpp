// ember.kv-snapshot.v1 without a model: canonical manifest, round trips, atomic writes, and
// every corruption verify must catch.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "kv/state.h"
#include "kv/state.h"
#include "kv/strict_json.h"
#include "kv/kv_test_util.h"
#include "support/test_support.h"
#include "util/error.h"

namespace ember::test {
namespace {

namespace fs = std::filesystem;
using kv::SnapshotManifest;
using kv::VerifiedState;

std::string write_valid(const std::string& tag, int positions = 7) {
  const std::string dir = temp_dir(tag) + "/snap";
  kv::write_state_dir(make_snapshot(3, 2, 8, positions, 11, positions + 5), dir, false);
  return dir;
}

// The verify error for `dir`, or "" if it verified.
std::string verify_error(const std::string& dir) {
  const kv::VerifyReport r = kv::verify_snapshot(dir);
  EXPECT_EQ(r.ok, r.error.empty());
  return r.error;
}

std::string read_error(const std::string& dir) {
  try {
    kv::read_state_dir(dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Both readers must refuse `dir`, naming `needle`.
void expect_rejected(const std::string& dir, const std::string& needle) {
  const std::string v = verify_error(dir), r = read_error(dir);
  EXPECT_NE(v.find(needle), std::string::npos) << "verify: " << v;
  EXPECT_NE(r.find(needle), std::string::npos) << "read: " << r;
}

TEST(SnapshotManifest, CanonicalJsonIsStableAndRoundTrips) {
  const VerifiedState s = make_snapshot(2, 2, 4, 5);
  const std::string a = s.manifest().to_json();
  EXPECT_EQ(a, s.manifest().to_json());
  EXPECT_EQ(a, s.manifest_text());
  const SnapshotManifest back = SnapshotManifest::from_json(a, "test");
  EXPECT_EQ(back.to_json(), a);
  EXPECT_EQ(back.prefix.tokens, s.manifest().prefix.tokens);
  EXPECT_EQ(back.rope.theta, 1000000.0f);
  // Fixed key order: format first, payload last; tokens on one line.
  EXPECT_EQ(a.rfind("{\n  \"format\": \"ember.kv-snapshot\",\n  \"version\": 3,", 0), 0u) << a;
  EXPECT_LT(a.find("\"prefix\""), a.find("\"resume\""));
  EXPECT_LT(a.find("\"resume\""), a.find("\"payload\""));
  EXPECT_EQ(a.back(), '\n');
}

TEST(SnapshotFiles, WriteReadRoundTripIsExact) {
  const VerifiedState s = make_snapshot(3, 2, 8, 7, 5, 12);
  const std::string dir = temp_dir("rt") + "/snap";
  kv::write_state_dir(s, dir, false);
  EXPECT_EQ(verify_error(dir), "");
  const VerifiedState r = kv::read_state_dir(dir);
  EXPECT_EQ(r.manifest().to_json(), s.manifest().to_json());
  EXPECT_EQ(slurp(dir + "/manifest.json"), s.manifest().to_json());
  ASSERT_EQ(r.cache().n_pos, 7);
  ASSERT_EQ(r.cache().capacity, 7);  // no unused capacity on disk unless asked for
  // A reader asked for room to decode leaves it after the P positions.
  const VerifiedState roomy = kv::read_state_dir(dir, {kv::Accept::native, false, /*capacity=*/10});
  EXPECT_EQ(roomy.cache().capacity, 10);
  EXPECT_EQ(roomy.cache().n_pos, 7);
  EXPECT_EQ(roomy.cache().k_row(2, 1, 6)[7], s.cache().k_row(2, 1, 6)[7]);
  for (int l = 0; l < 3; ++l)
    for (int h = 0; h < 2; ++h)
      for (int p = 0; p < 7; ++p)
        for (int d = 0; d < 8; ++d) {
          ASSERT_EQ(r.cache().k_row(l, h, p)[d], s.cache().k_row(l, h, p)[d]);
          ASSERT_EQ(r.cache().v_row(l, h, p)[d], s.cache().v_row(l, h, p)[d]);
        }
  EXPECT_EQ(fs::file_size(dir + "/keys.f16le"), 2u * 3 * 2 * 7 * 8);
  // Writing what was read gives the same bytes again.
  const std::string dir2 = temp_dir("rt2") + "/snap";
  kv::write_state_dir(r, dir2, false);
  for (const char* f : {"manifest.json", "keys.f16le", "values.f16le"})
    EXPECT_EQ(slurp(dir + "/" + f), slurp(dir2 + "/" + f)) << f;
}

TEST(SnapshotFiles, RefusesOverwriteWithoutForce) {
  const std::string dir = write_valid("force");
  const std::string before = slurp(dir + "/keys.f16le");
  const VerifiedState other = make_snapshot(3, 2, 8, 9, 99);
  try {
    kv::write_state_dir(other, dir, false);
    ADD_FAILURE() << "overwrote without force";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--force"), std::string::npos) << e.what();
  }
  EXPECT_EQ(slurp(dir + "/keys.f16le"), before);
  kv::write_state_dir(other, dir, true);
  EXPECT_EQ(kv::read_state_dir(dir).manifest().geometry.positions, 9);
  EXPECT_EQ(std::distance(fs::directory_iterator(fs::path(dir).parent_path()), {}), 1);
}

TEST(SnapshotFiles, InterruptedWriteLeavesNothing) {
  // A value the writer refuses in the second payload: it notices after the keys file is
  // complete and aborts; neither the target nor a temporary may remain.
  kv::KvState bad = make_state(2, 2, 4, 6);
  bad.cache.v_row(1, 1, 5)[3] = 0x7e00;
  const VerifiedState s = kv::seal(std::move(bad), "test");
  const std::string parent = temp_dir("interrupt");
  try {
    kv::write_state_dir(s, parent + "/snap", false);
    ADD_FAILURE() << "wrote a non-finite cache";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("values.f16le: payload.values: expected finite"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(fs::is_empty(parent));
}

TEST(SnapshotFiles, StaleTemporaryOfAKilledWriterIsRemoved) {
  // A temporary is stale only when its writer is gone: a reaped child's pid, not pid 1.
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  const std::string parent = temp_dir("stale"), temp = "/.snap.tmp-" + std::to_string(dead) + "-0";
  fs::create_directories(parent + temp);
  spit(parent + temp + "/keys.f16le", "half");
  kv::write_state_dir(make_snapshot(1, 1, 2, 1), parent + "/snap", false);
  EXPECT_EQ(std::distance(fs::directory_iterator(parent), {}), 1);
}

// Issue 12, defect 2: a FIFO as a payload made verify wait forever for a writer. It runs in a
// child that is killed (and the test failed) if it has not finished within 10 s.
TEST(SnapshotVerify, RefusesAFifoPayloadWithoutBlocking) {
  for (const char* f : {"keys.f16le", "values.f16le"}) {
    const std::string dir = write_valid("fifo");
    fs::remove(dir + "/" + f);
    ASSERT_EQ(::mkfifo((dir + "/" + f).c_str(), 0600), 0);
    int msg[2];
    ASSERT_EQ(::pipe(msg), 0);
    const pid_t child = ::fork();
    if (child == 0) {
      const std::string e = verify_error(dir);
      (void)!::write(msg[1], e.data(), e.size());
      ::_exit(0);
    }
    ::close(msg[1]);
    int status = 0;
    bool done = false;
    for (int i = 0; i < 1000 && !done; ++i) {
      done = ::waitpid(child, &status, WNOHANG) == child;
      if (!done) ::usleep(10000);
    }
    if (!done) {
      ::kill(child, SIGKILL);
      ::waitpid(child, &status, 0);
    }
    std::string got;
    char buf[512];
    for (ssize_t r; (r = ::read(msg[0], buf, sizeof buf)) > 0;) got.append(buf, size_t(r));
    ::close(msg[0]);
    EXPECT_TRUE(done) << f << ": kv verify blocked on a FIFO payload";
    EXPECT_NE(got.find(dir + "/" + f), std::string::npos) << got;
    EXPECT_NE(got.find("a FIFO"), std::string::npos) << got;
  }
}

TEST(SnapshotVerify, CatchesAFlippedBitInEachPayload) {
  for (const char* f : {"keys.f16le", "values.f16le"}) {
    const std::string dir = write_valid("flip");
    std::string b = slurp(dir + "/" + f);
    b[b.size() / 3] ^= 0x10;
    spit(dir + "/" + f, b);
    // Version 2 names the block (layer, positions) and the payload before the payload's hash.
    expect_rejected(dir, dir + "/" + f + ": proof.blocks[");
    expect_rejected(dir, std::string(f[0] == 'k' ? "K" : "V") + " rows of layer ");
  }
}

TEST(SnapshotVerify, CatchesTruncatedAndExtendedPayloads) {
  for (int delta : {-1, -2, 2, 1}) {
    const std::string dir = write_valid("size");
    std::string b = slurp(dir + "/keys.f16le");
    if (delta < 0) b.resize(b.size() - size_t(-delta)); else b.append(size_t(delta), '\0');
    spit(dir + "/keys.f16le", b);
    expect_rejected(dir, delta < 0 ? "(truncated)" : "(extended)");
    expect_rejected(dir, "payload.keys.bytes");
  }
}

TEST(SnapshotVerify, CatchesMissingFiles) {
  for (const char* f : {"manifest.json", "keys.f16le", "values.f16le"}) {
    const std::string dir = write_valid("missing");
    fs::remove(dir + "/" + f);
    expect_rejected(dir, "missing");
  }
  expect_rejected(temp_dir("nodir") + "/absent", "missing");
}

TEST(SnapshotVerify, CatchesStrayEntriesAndLinks) {
  const std::string dir = write_valid("stray");
  spit(dir + "/extra.bin", "x");
  expect_rejected(dir, "unexpected entry 'extra.bin'");
  const std::string dir2 = write_valid("link");
  fs::rename(dir2 + "/values.f16le", dir2 + "/../elsewhere");
  fs::create_symlink("../elsewhere", dir2 + "/values.f16le");
  expect_rejected(dir2, "payload.values");
}

TEST(SnapshotVerify, CatchesMalformedManifest) {
  const std::string dir = write_valid("malformed");
  std::string m = slurp(dir + "/manifest.json");
  spit(dir + "/manifest.json", m.substr(0, m.size() / 2));
  expect_rejected(dir, "malformed");
  spit(dir + "/manifest.json", "[1, 2]");
  expect_rejected(dir, "top level: expected an object");
}

TEST(SnapshotVerify, CatchesDuplicatedKeysAtAnyDepth) {
  {
    const std::string dir = write_valid("dup-top");
    std::string m = slurp(dir + "/manifest.json");
    m.insert(1, "\n  \"version\": 1,");
    spit(dir + "/manifest.json", m);
    expect_rejected(dir, "version: expected a key that appears once");
  }
  {
    // A later duplicate that nlohmann would silently keep: the hash the attacker wants.
    const std::string dir = write_valid("dup-nested");
    std::string m = slurp(dir + "/manifest.json");
    const size_t at = m.find("\"sha256\"", m.find("\"keys\": {"));
    m.insert(at, "\"sha256\": \"" + std::string(64, '0') + "\",\n      ");
    spit(dir + "/manifest.json", m);
    expect_rejected(dir, "payload.keys.sha256: expected a key that appears once");
  }
}

// A well-formed witness of `length` tokens (its hashes arbitrary) in the proof of `j`, its first
// token the resume token plus `shift`.
void add_witness(kv::ordered_json& j, int length, int shift = 0) {
  kv::ordered_json& p = j["proof"];
  const int32_t resume = j["resume"]["token"].get<int32_t>();
  p["witness_length"] = length;
  p["witness_tokens"] = kv::ordered_json::array();
  for (int i = 0; i < length; ++i) p["witness_tokens"].push_back(i == 0 ? resume + shift : i);
  p["witness_logits_sha256"] = std::string(64, 'a');
  p["witness_attention_sha256"] = kv::ordered_json::array();
  for (int l = 0; l < j["geometry"]["layers"].get<int>(); ++l) p["witness_attention_sha256"].push_back(std::string(64, 'b'));
}

TEST(SnapshotVerify, CatchesUnknownMissingAndMistypedKeys) {
  struct Case {
    const char* needle;
    std::function<void(kv::ordered_json&)> edit;
  };
  const std::vector<Case> cases = {
      {"rope.extra: expected no such key", [](auto& j) { j["rope"]["extra"] = 1; }},
      {"comment: expected no such key", [](auto& j) { j["comment"] = "hi"; }},
      {"tokenizer.identity: expected present, found missing", [](auto& j) { j["tokenizer"].erase("identity"); }},
      {"geometry.layers: expected an integer, found string", [](auto& j) { j["geometry"]["layers"] = "3"; }},
      {"geometry.layers: expected an integer, found number", [](auto& j) { j["geometry"]["layers"] = 3.5; }},
      {"attention.qkv_bias: expected true or false", [](auto& j) { j["attention"]["qkv_bias"] = 1; }},
      {"rope.theta: expected a finite value exactly representable as f32", [](auto& j) { j["rope"]["theta"] = 0.1; }},
      {"version: expected 1..3 (this reader), found 4", [](auto& j) { j["version"] = 4; }},
      {"proof: expected no such key", [](auto& j) { j["version"] = 1; }},  // a v1 document has no proof
      // The witness (version 3): all of it or none, starting at the resume token.
      {"proof.witness_attention_sha256: expected no such key",
       [](auto& j) { add_witness(j, 2), j["version"] = 2; }},  // a v2 document has none
      {"proof.witness_tokens: expected 3 ids (proof.witness_length)",
       [](auto& j) { add_witness(j, 2), j["proof"]["witness_length"] = 3; }},
      {"proof.witness_tokens: expected 2 ids (proof.witness_length), found none",
       [](auto& j) { add_witness(j, 2), j["proof"].erase("witness_tokens"); }},
      {"proof.witness_tokens: expected 0 ids (proof.witness_length)",
       [](auto& j) { add_witness(j, 2), j["proof"].erase("witness_length"); }},
      {"proof.witness_length: expected an integer in [1, 256]",
       [](auto& j) { add_witness(j, 2), j["proof"]["witness_length"] = 0; }},
      {"proof.witness_tokens[0]: expected", [](auto& j) { add_witness(j, 2, 1); }},
      {"proof.witness_tokens[1]: expected an id < vocab_size",
       [](auto& j) { add_witness(j, 2), j["proof"]["witness_tokens"][1] = 1 << 20; }},
      {"proof.witness_logits_sha256: expected the hash of the witness's logits",
       [](auto& j) { add_witness(j, 2), j["proof"].erase("witness_logits_sha256"); }},
      {"proof.witness_tokens: expected the witness's tokens",
       [](auto& j) {
         add_witness(j, 2);
         j["proof"].erase("witness_tokens");
         j["proof"].erase("witness_length");
       }},
      {"proof.witness_attention_sha256: expected 3 hashes (one per layer",
       [](auto& j) { add_witness(j, 2), j["proof"]["witness_attention_sha256"].erase(0); }},
      {"proof.witness_attention_sha256[1]: expected 64 lowercase hex",
       [](auto& j) { add_witness(j, 2), j["proof"]["witness_attention_sha256"][1] = "x"; }},
      {"proof.blocks: expected 3 entries", [](auto& j) { j["proof"]["blocks"].erase(0); }},
      {"proof.blocks[0]: expected 64 lowercase hex", [](auto& j) { j["proof"]["blocks"][0] = "x"; }},
      {"proof.block_positions: expected 16", [](auto& j) { j["proof"]["block_positions"] = 8; }},
      {"proof.boundary_logits_sha256: expected 64 lowercase hex",
       [](auto& j) { j["proof"]["boundary_logits_sha256"] = "ABC"; }},
      {"format: expected ember.kv-snapshot", [](auto& j) { j["format"] = "other"; }},
      {"representation.dtype: expected one of f16", [](auto& j) { j["representation"]["dtype"] = "bf16"; }},
      {"representation.keys: expected one of", [](auto& j) { j["representation"]["keys"] = "rotated"; }},
      {"rope.layout: expected one of normal|neox", [](auto& j) { j["rope"]["layout"] = "gptj"; }},
      {"model.architecture: expected one of", [](auto& j) { j["model"]["architecture"] = "gemma"; }},
      {"model.identity: expected 64 lowercase hex", [](auto& j) { j["model"]["identity"] = "ABC"; }},
      {"payload.keys.file: expected keys.f16le", [](auto& j) { j["payload"]["keys"]["file"] = "../../etc/passwd"; }},
      {"prefix.sha256: expected", [](auto& j) { j["prefix"]["sha256"] = std::string(64, 'a'); }},
      {"prefix.tokens: expected 7 ids (prefix.count)", [](auto& j) { j["prefix"]["tokens"].push_back(1); }},
      {"prefix.tokens[0]: expected an id < vocab_size", [](auto& j) { j["prefix"]["tokens"][0] = 512; }},
      {"resume.position: expected 7", [](auto& j) { j["resume"]["position"] = 6; }},
      {"resume.token: expected an id < vocab_size", [](auto& j) { j["resume"]["token"] = 600; }},
      {"resume.selection: expected one of greedy-argmax", [](auto& j) { j["resume"]["selection"] = "sampled"; }},
      {"payload.values.bytes: expected", [](auto& j) { j["payload"]["values"]["bytes"] = 10; }},
  };
  for (const auto& c : cases) {
    const std::string dir = write_valid("keys");
    edit_manifest(dir, c.edit);
    expect_rejected(dir, c.needle);
  }
}

TEST(SnapshotVerify, AbsurdGeometryIsRefusedWithoutAllocating) {
  // Inside the per-field limits but implying a 2^51-byte payload: the size check against the
  // real file refuses it before anything is allocated (ASan would report the attempt).
  const std::string dir = write_valid("absurd");
  edit_manifest(dir, [](auto& j) {
    j["geometry"]["layers"] = 1024;
    j["geometry"]["kv_heads"] = 1024;
    j["geometry"]["head_dim"] = 4096;
    j["model"]["query_heads"] = 1024;
    const uint64_t b = 2ull * 1024 * 1024 * 4096 * 7;
    j["payload"]["keys"]["bytes"] = b;
    j["payload"]["values"]["bytes"] = b;
    j["proof"]["blocks"] = std::vector<std::string>(1024, std::string(64, 'a'));  // one per layer
  });
  expect_rejected(dir, "payload.keys.bytes: expected 60129542144 (manifest)");
  for (const char* field : {"layers", "kv_heads", "head_dim", "positions"}) {
    const std::string d2 = write_valid("absurd2");
    edit_manifest(d2, [&](auto& j) { j["geometry"][field] = int64_t(1) << 40; });
    expect_rejected(d2, std::string("geometry.") + field + ": expected an integer in [1, ");
  }
  const std::string d3 = write_valid("negative");
  edit_manifest(d3, [](auto& j) { j["payload"]["keys"]["bytes"] = -1; });
  expect_rejected(d3, "payload.keys.bytes: expected a non-negative integer");
}

TEST(SnapshotVerify, ReportListsEveryCheck) {
  const std::string dir = write_valid("report");
  const kv::VerifyReport ok = kv::verify_snapshot(dir);
  ASSERT_TRUE(ok.ok) << ok.error;
  // directory, manifest, bytes per payload, proof.blocks, then sha256/finite per payload
  ASSERT_EQ(ok.checks.size(), 9u);
  for (const auto& c : ok.checks) EXPECT_EQ(c.status, "ok") << c.name;
  fs::remove(dir + "/manifest.json");
  const kv::VerifyReport bad = kv::verify_snapshot(dir);
  EXPECT_FALSE(bad.ok);
  EXPECT_EQ(bad.checks[1].status, "failed");
  EXPECT_EQ(bad.checks.back().status, "skipped");
}

TEST(StateLoader, DispatchesOnDirectoryOrFile) {
  const std::string dir = write_valid("loader");
  EXPECT_EQ(kv::state_kind(dir), "snapshot-dir");
  EXPECT_EQ(kv::open_state(dir).manifest().to_json(),
            kv::read_state_header(dir, kv::Accept::native).header.manifest.to_json());
  const std::string other = temp_dir("loader-file") + "/x.bin";
  spit(other, "not a state");
  EXPECT_EQ(kv::state_kind(other), "");
  EXPECT_THROW(kv::open_state(other), Error);
  EXPECT_THROW(kv::open_state(other + ".missing"), Error);
}

TEST(StrictJson, DuplicateDetectionKeepsSiblingsApart) {
  // The same key in two different objects is not a duplicate.
  EXPECT_NO_THROW(kv::parse_json_strict(R"({"a": {"x": 1}, "b": {"x": 2}, "c": [{"x": 1}, {"x": 2}]})", "t"));
  EXPECT_THROW(kv::parse_json_strict(R"({"c": [{"x": 1, "x": 2}]})", "t"), Error);
  std::string deep(100, '[');
  EXPECT_THROW(kv::parse_json_strict(deep + std::string(100, ']'), "t"), Error);
}

TEST(KvVerifyCli, ExitCodesAndJson) {
  const std::string dir = write_valid("cli");
  std::string out;
  EXPECT_EQ(run_command(ember_binary() + " kv verify " + dir, &out), 0) << out;
  EXPECT_NE(out.find("ok (7 positions, resume token"), std::string::npos) << out;
  EXPECT_EQ(run_command(ember_binary() + " kv verify --json " + dir, &out), 0) << out;
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["result"], "ok");
  std::string b = slurp(dir + "/values.f16le");
  b[0] ^= 1;
  spit(dir + "/values.f16le", b);
  EXPECT_EQ(run_command(ember_binary() + " kv verify " + dir, &out), 1) << out;
  EXPECT_NE(out.find("payload.values.sha256"), std::string::npos) << out;
}

}  // namespace
}  // namespace ember::test
