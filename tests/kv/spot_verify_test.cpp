// `kv verify --model M --spot K` (kv/spot_check.h) and the proof (version 2: blocks and boundary
// logits; version 3: the witness, kv/witness.h): clean caches made on every thread count and SIMD
// path pass; planted corruptions that the seal cannot see (a state resealed over rows its prefix
// cannot have produced) are caught and named; versions 1 and 2 are still read; the store names
// the bad block.
#include <gtest/gtest.h>

#include <cstdlib>

#include <nlohmann/json.hpp>

#include "kv/kv_test_util.h"
#include "kv/replay.h"
#include "kv/spot_check.h"
#include "kv/witness.h"
#include "model/engine.h"
#include "store/store.h"
#include "support/cli_run.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"
#include "util/simd.h"

namespace ember::kv::spot_test {
namespace {

using test::q;
using test::run_ember;

const char* kPrompt =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the sunshine. "
    "One day she saw a big dog in the park and they became friends.";

struct Fixture {
  std::shared_ptr<const model::Model> m = model::Model::load(test::shared_path("models/stories260K.gguf"));
  std::unique_ptr<tok::Tokenizer> tok = tok::Tokenizer::from_gguf(m->file());
  model::Engine e{m, {1}};
  ExportResult exported(const std::string& text) { return export_prefix(e, tok->identity(), tok->encode(text, true), "test"); }
};

// The state with `edit` applied to its cache and sealed again: bytes and seal agree, so only a
// recomputation can tell. The manifest keeps the producer's boundary logits hash.
VerifiedState forged(const VerifiedState& s, const std::function<void(model::KvCache&)>& edit) {
  KvState x = s.copy().release();
  edit(x.cache);
  return seal(std::move(x), "forged");
}

SpotReport check(Fixture& f, const VerifiedState& s, int k, uint64_t seed = 0) {
  return spot_check(f.e, s.manifest(), s.cache(), k, seed);
}

TEST(SpotCheck, ACleanCachePassesWithItsBoundaryLogits) {
  Fixture f;
  const ExportResult x = f.exported(kPrompt);
  for (int k : {1, 2, 4, 8}) {
    const SpotReport r = check(f, x.snapshot, k, 7);
    EXPECT_TRUE(r.ok()) << r.summary();
    EXPECT_EQ(r.logits, "ok");
    EXPECT_EQ(r.positions.back().position, x.snapshot.manifest().geometry.positions - 1);
    EXPECT_EQ(int(r.positions.size()), k);
  }
  EXPECT_EQ(x.snapshot.manifest().proof.boundary_logits_sha256, logits_hash(x.boundary_logits));
}

TEST(SpotCheck, AFlippedBitAtTheLastPositionIsNamedByLayerHeadAndPosition) {
  Fixture f;
  const ExportResult x = f.exported(kPrompt);
  const int P = x.snapshot.manifest().geometry.positions;
  const VerifiedState bad = forged(x.snapshot, [&](model::KvCache& c) { c.k_row(3, 2, P - 1)[5] ^= 0x0400; });
  const SpotReport r = check(f, bad, 1);
  ASSERT_FALSE(r.ok());
  ASSERT_NE(r.first_diff(), nullptr);
  EXPECT_EQ(r.first_diff()->layer, 3);
  EXPECT_EQ(r.first_diff()->kv_head, 2);
  EXPECT_EQ(r.first_diff()->position, P - 1);
  EXPECT_FALSE(r.first_diff()->values);
  EXPECT_NE(r.summary().find("K row of layer 3, kv_head 2, position " + std::to_string(P - 1)), std::string::npos)
      << r.summary();
}

TEST(SpotCheck, PlantedCorruptionsAreCaughtWithOneSpot) {
  Fixture f;
  const ExportResult x = f.exported(kPrompt);
  const int P = x.snapshot.manifest().geometry.positions;
  ASSERT_GE(P, 33);
  // Another prompt of the same length: its rows under this manifest.
  std::vector<int32_t> other = f.tok->encode("The cat sat on the mat and looked at the moon. It was a quiet night.", true);
  while (int(other.size()) < P) other.push_back(other[other.size() % 7 + 1]);
  other.resize(size_t(P));
  const ExportResult y = export_prefix(f.e, f.tok->identity(), other, "test");
  const std::vector<std::pair<std::string, std::function<void(model::KvCache&)>>> cases = {
      {"flip early", [](model::KvCache& c) { c.v_row(1, 0, 4)[2] ^= 0x0200; }},
      {"flip last layer", [&](model::KvCache& c) { c.k_row(c.n_layers - 1, 1, 9)[0] ^= 0x0100; }},
      {"swap blocks",
       [](model::KvCache& c) {
         for (int l = 0; l < c.n_layers; ++l)
           for (int h = 0; h < c.n_kv_heads; ++h)
             for (int p = 0; p < 16; ++p)
               for (int d = 0; d < c.head_dim; ++d) {
                 std::swap(c.k_row(l, h, p)[d], c.k_row(l, h, p + 16)[d]);
                 std::swap(c.v_row(l, h, p)[d], c.v_row(l, h, p + 16)[d]);
               }
       }},
      {"other prompt", [&](model::KvCache& c) { c.copy_prefix(y.snapshot.cache(), P); }},
      // A tail lost and padded back with zeros (the construction docs/results/spot-verify.md uses).
      {"truncated tail",
       [&](model::KvCache& c) {
         for (int l = 0; l < c.n_layers; ++l)
           for (int h = 0; h < c.n_kv_heads; ++h)
             for (int p = P - 3; p < P; ++p) {
               std::fill_n(c.k_row(l, h, p), c.head_dim, uint16_t(0));
               std::fill_n(c.v_row(l, h, p), c.head_dim, uint16_t(0));
             }
       }},
  };
  for (const auto& [name, edit] : cases) {
    const SpotReport r = check(f, forged(x.snapshot, edit), 1);
    EXPECT_FALSE(r.ok()) << name << ": " << r.summary();
  }
}

// Clean caches exported with 1-3 threads on every SIMD path this CPU has pass the CLI check,
// which runs on the default path with 2 threads.
TEST(SpotVerifyCli, CleanCachesFromEveryThreadCountAndSimdPathPass) {
  const std::string model = test::shared_path("models/stories260K.gguf");
  const std::string dir = test::temp_dir("spot-clean");
  for (SimdLevel level : test::simd_levels_under_test())
    for (int threads : {1, 2, 3}) {
      const std::string snap = dir + "/" + simd_name(level) + "-" + std::to_string(threads);
      // EMBER_SIMD set for the export alone.
      ASSERT_EQ(test::run_command("EMBER_SIMD=" + std::string(simd_name(level)) + " " + test::ember_binary() +
                                  " kv export --model " + q(model) + " --threads " + std::to_string(threads) +
                                  " --prompt " + q(kPrompt) + " --output " + q(snap)),
                0);
      const test::CliRun v = run_ember("kv verify " + q(snap) + " --model " + q(model) + " --spot 4 --threads 2");
      EXPECT_EQ(v.rc, 0) << simd_name(level) << " threads " << threads << ": " << v.out;
      EXPECT_NE(v.out.find("spot.boundary_logits   ok"), std::string::npos) << v.out;
    }
}

TEST(SpotVerifyCli, AForgedCacheFailsWithExitOneNamingTheRowInTextAndJson) {
  Fixture f;
  const ExportResult x = f.exported(kPrompt);
  const int P = x.snapshot.manifest().geometry.positions;
  const std::string dir = test::temp_dir("spot-forged") + "/snap";
  write_state_dir(forged(x.snapshot, [&](model::KvCache& c) { c.v_row(2, 1, P - 1)[3] ^= 0x0001; }), dir, false);
  const std::string model = test::shared_path("models/stories260K.gguf");
  EXPECT_EQ(run_ember("kv verify " + q(dir)).rc, 0);  // its bytes are its seal's
  const test::CliRun t = run_ember("kv verify " + q(dir) + " --model " + q(model) + " --spot 2 --seed 3");
  EXPECT_EQ(t.rc, 1) << t.out;
  EXPECT_NE(t.out.find("V row of layer 2, kv_head 1, position " + std::to_string(P - 1)), std::string::npos) << t.out;
  const test::CliRun j = run_ember("kv verify " + q(dir) + " --model " + q(model) + " --spot 2 --json");
  EXPECT_EQ(j.rc, 1) << j.out;
  const size_t open = j.out.find("{\n");  // stdout's JSON, beside the error line on stderr
  ASSERT_NE(open, std::string::npos) << j.out;
  const std::string json = j.out.substr(open, j.out.rfind("\n}") + 2 - open);
  const nlohmann::json doc = nlohmann::json::parse(json);
  EXPECT_EQ(doc["result"], "failed");
  EXPECT_EQ(doc["spot"]["first_diff"]["layer"], 2);
  EXPECT_EQ(doc["spot"]["first_diff"]["kv_head"], 1);
  EXPECT_EQ(doc["spot"]["first_diff"]["position"], P - 1);
  EXPECT_EQ(doc["spot"]["first_diff"]["payload"], "values");
  // --spot without --model is a usage error.
  EXPECT_EQ(run_ember("kv verify " + q(dir) + " --spot 2").rc, 2);
}

// A version 1 snapshot (no proof; payload hashes over the whole files) is still read, verified
// and spot-checked (its boundary logits were not recorded).
TEST(SnapshotVersions, AVersionOneSnapshotIsStillRead) {
  Fixture f;
  const ExportResult x = f.exported(kPrompt);
  const std::string dir = test::temp_dir("v1") + "/snap";
  write_state_dir(x.snapshot, dir, false);
  test::edit_manifest(dir, [](auto& j) {
    j["version"] = 1;
    j.erase("proof");
  });
  test::rehash_payloads(dir);
  const VerifiedState s = open_state(dir);
  EXPECT_EQ(s.manifest().version, 1);
  EXPECT_TRUE(s.manifest().proof.blocks.empty());
  EXPECT_EQ(s.manifest().keys.sha256, sha256_hex(test::slurp(dir + "/keys.f16le")));
  const VerifyReport r = verify_snapshot(dir);
  EXPECT_TRUE(r.ok) << r.error;
  const SpotReport sr = check(f, s, 4);
  EXPECT_TRUE(sr.ok()) << sr.summary();
  EXPECT_EQ(sr.logits, "not-recorded");
  // Re-sealed (a changed state), it is written as the current version.
  KvState c = s.copy().release();
  EXPECT_EQ(seal(std::move(c), "reseal").manifest().version, kSnapshotVersion);
}

// A version 2 snapshot (a proof without a witness) is still read and spot-checked.
TEST(SnapshotVersions, AVersionTwoSnapshotIsStillRead) {
  Fixture f;
  const ExportResult x = f.exported(kPrompt);
  const std::string dir = test::temp_dir("v2") + "/snap";
  write_state_dir(x.snapshot, dir, false);
  test::edit_manifest(dir, [](auto& j) {
    j["version"] = 2;
    for (const char* k : {"witness_length", "witness_tokens", "witness_logits_sha256", "witness_attention_sha256"})
      j["proof"].erase(k);
  });
  const VerifiedState s = open_state(dir);
  EXPECT_EQ(s.manifest().version, 2);
  const SpotReport sr = check(f, s, 4);
  EXPECT_TRUE(sr.ok()) << sr.summary();
  EXPECT_EQ(sr.logits, "ok");
  EXPECT_EQ(sr.witness, "not-recorded");
}

// The witness the export decoded token by token is what one chunk over the stored cache
// computes, with 1 thread or 2: a clean cache can never fail it.
TEST(SpotWitness, ExportRecordsAWitnessThatOneChunkReproduces) {
  Fixture f;
  const ExportResult x = f.exported(kPrompt);
  const ProofInfo& p = x.snapshot.manifest().proof;
  ASSERT_EQ(int(p.witness_tokens.size()), kDefaultWitnessLength);
  EXPECT_EQ(p.witness_tokens[0], x.snapshot.manifest().resume.token);
  EXPECT_EQ(int(p.witness_attention_sha256.size()), f.m->config().n_layers);
  for (int threads : {1, 2}) {
    model::Engine e(f.m, {threads});
    const Witness w = run_witness(e, x.snapshot.cache(), p.witness_tokens);
    EXPECT_EQ(w.logits_sha256, p.witness_logits_sha256) << threads << " threads";
    EXPECT_EQ(w.attention_sha256, p.witness_attention_sha256) << threads << " threads";
  }
  // Decoded again by the recorder, on the other engine: the same record.
  model::Engine e2(f.m, {2});
  const Witness again = record_witness(e2, x.snapshot.cache(), p.witness_tokens[0], kDefaultWitnessLength);
  EXPECT_EQ(again.tokens, p.witness_tokens);
  EXPECT_EQ(again.logits_sha256, p.witness_logits_sha256);
  const SpotReport r = check(f, x.snapshot, 1);
  EXPECT_EQ(r.witness, "ok");
  EXPECT_EQ(r.witness_length, kDefaultWitnessLength);
}

// Low bits flipped at positions the check does not sample: the rows it recomputes and the
// boundary logits can miss them (f16 rounding absorbs the change), the witness catches some of
// those, and whenever it catches one it names the flipped layer: the layers below read rows
// nothing changed.
TEST(SpotWitness, FlipsTheSampledRowsMissAreCaughtByTheWitnessNamingTheLayer) {
  Fixture f;
  const ExportResult x = f.exported(kPrompt);
  const int P = x.snapshot.manifest().geometry.positions;
  const int layers = f.m->config().n_layers;
  int witness_only = 0, witness_caught = 0;
  for (int layer = 0; layer < layers; ++layer)
    for (int pos : {2, 11, 20})
      for (int bit : {0, 2, 4}) {
        const VerifiedState bad = forged(x.snapshot, [&](model::KvCache& c) {
          c.v_row(layer, layer % c.n_kv_heads, pos)[pos % c.head_dim] ^= uint16_t(1u << bit);
        });
        const SpotReport r = check(f, bad, 1);  // only P - 1 sampled
        ASSERT_LT(pos, P - 1);
        if (r.witness != "differs") continue;
        ++witness_caught;
        EXPECT_FALSE(r.ok());
        EXPECT_EQ(r.witness_first_layer, layer) << "flip at layer " << layer << ", position " << pos;
        if (!r.first_diff() && r.logits == "ok") {
          ++witness_only;
          EXPECT_NE(r.summary().find("first in the attention scores or output of layer " + std::to_string(layer)),
                    std::string::npos)
              << r.summary();
        }
      }
  EXPECT_GT(witness_caught, 0);
  EXPECT_GT(witness_only, 0) << "no flip was caught by the witness alone";
}

TEST(SpotWitnessCli, ExportWitnessZeroRecordsNoneAndVerifySaysSo) {
  const std::string model = test::shared_path("models/stories260K.gguf");
  const std::string dir = test::temp_dir("witness-cli");
  ASSERT_EQ(run_ember("kv export -m " + q(model) + " -p " + q(kPrompt) + " --witness 0 -o " + q(dir + "/none")).rc, 0);
  EXPECT_EQ(test::slurp(dir + "/none/manifest.json").find("witness"), std::string::npos);
  const test::CliRun v = run_ember("kv verify " + q(dir + "/none") + " -m " + q(model) + " --spot 2");
  EXPECT_EQ(v.rc, 0) << v.out;
  EXPECT_NE(v.out.find("spot.witness           skipped"), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("no witness recorded"), std::string::npos) << v.out;
  ASSERT_EQ(run_ember("kv export -m " + q(model) + " -p " + q(kPrompt) + " --witness 4 -o " + q(dir + "/four")).rc, 0);
  const test::CliRun j = run_ember("kv verify " + q(dir + "/four") + " -m " + q(model) + " --spot 2 --json");
  EXPECT_EQ(j.rc, 0) << j.out;
  const nlohmann::json doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc["spot"]["witness"]["status"], "ok");
  EXPECT_EQ(doc["spot"]["witness"]["tokens"], 4);
  EXPECT_EQ(doc["witness_tokens"], 4);
  EXPECT_EQ(run_ember("kv export -m " + q(model) + " -p " + q(kPrompt) + " --witness 300 -o " + q(dir + "/big")).rc, 2);
}

TEST(StoreProof, AFlippedByteInAChunkNamesTheBlock) {
  const VerifiedState s = test::make_snapshot(2, 2, 64, 40);
  store::Store st = store::Store::open("dir:" + test::temp_dir("store-proof") + "/s");
  const store::PutResult r = st.put(s, {"c", false, 4096});
  const store::Entry e = st.read_entry(r.seal);
  // values chunk 3 of 5 holds bytes [8192, 12288) of values.f16le ([layer][kv_head][position]
  // [dim], 40 * 64 * 2 = 5120 bytes a head): byte 8292 is layer 0, kv_head 1, position
  // (8292 - 5120) / 128 = 24: block 1 (positions 16-31), proof.blocks[1].
  const std::string key = store::KeyLayout::chunk(r.seal, e.chunks[1][2]);
  std::string bytes = *st.backend().get(key, 1 << 20);
  bytes[100] ^= 0x01;
  st.backend().replace(key, bytes);
  const std::string err = test::error_of([&] { st.get(r.seal); });
  EXPECT_NE(err.find("chunk " + key + " (payload.values chunk 3 of 5): sha256"), std::string::npos) << err;
  EXPECT_NE(err.find("proof.blocks[1]"), std::string::npos) << err;
  EXPECT_NE(err.find("V rows of layer 0, block 1 (positions 16-31)"), std::string::npos) << err;
}

}  // namespace
}  // namespace ember::kv::spot_test
