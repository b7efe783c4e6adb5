// The CLI path on a real model: collect -> fit -> apply -> replay, the identity map giving the
// native continuation, and the mapped cache never passing for a native snapshot.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "kv/import.h"
#include "kv/state.h"
#include "kv/state.h"
#include "map/mapper.h"
#include "map/metrics.h"
#include "map/target_coords.h"
#include "model/engine.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace ember::map {
namespace {

std::string models() { return test::shared_path("models"); }

// A native snapshot of `prompt` on stories260K, written with the snapshot module's own
// writer; returns the greedy continuation of `n` tokens after the resume token.
std::vector<int32_t> export_native(const std::string& dir, const std::string& prompt, int n) {
  auto m = model::Model::load(models() + "/stories260K.gguf");
  auto t = tok::Tokenizer::from_gguf(m->file());
  model::Engine e(m, {});
  const auto ids = t->encode(prompt, true);
  model::KvCache full = e.new_cache(int(ids.size()) + n + 2);
  std::vector<float> logits = e.forward(full, ids);
  kv::KvState s;
  s.manifest = map::target_coordinates(e, t->identity());
  s.manifest.prefix.tokens = ids;
  s.manifest.resume.token = first_argmax(logits.data(), int(logits.size()));
  s.manifest.resume.position = int64_t(ids.size());
  s.cache = model::KvCache(full.n_layers, full.n_kv_heads, full.head_dim, int(ids.size()));
  s.cache.n_pos = int(ids.size());
  s.cache.copy_prefix(full, int(ids.size()));
  int32_t next = s.manifest.resume.token;
  kv::write_state_dir(kv::seal(std::move(s), dir), dir, false);
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    logits = e.forward(full, std::span<const int32_t>(&next, 1));
    next = first_argmax(logits.data(), int(logits.size()));
    out.push_back(next);
  }
  return out;
}

TEST(MappedCache, IdentityMapOntoItsOwnModelReplaysTheNativeContinuation) {
  const std::string dir = test::temp_dir("mapped-identity");
  const std::vector<int32_t> native = export_native(dir + "/snap", "Once upon a time, there was a little dog", 12);
  // Calibration of the model against itself (tiny), an identity mapper and a ridge mapper.
  std::string out;
  const std::string bin = test::ember_binary();
  const std::string base = models() + "/stories260K.gguf";
  ASSERT_EQ(test::run_command("EMBER_PROGRESS=1 " + bin + " map collect --source " + base + " --target " + base +
                                  " --prompts " + models() + "/prompts-stories-kjv.txt --split 24:8 --seed 3 --output " +
                                  dir + "/calib",
                              &out), 0) << out;
  EXPECT_NE(out.find("collect  32/32 prompts"), std::string::npos) << out;  // the status line, forced on
  ASSERT_EQ(test::run_command(bin + " map fit --calibration " + dir + "/calib --kind identity --relation quantization-boundary --output " + dir + "/id", &out), 0) << out;
  ASSERT_EQ(test::run_command(bin + " map fit --calibration " + dir + "/calib --kind ridge --lambda 1e-6 --relation quantization-boundary --output " + dir + "/ridge", &out), 0) << out;
  // Ridge fitted source = target: W ~ I and R² ~ 1 on held-out prompts, every layer and head.
  const Mapper ridge = Mapper::read(dir + "/ridge");
  EXPECT_EQ(ridge.shared_layers, 5);  // a model shares every layer with itself
  for (const HeadMaps& h : ridge.heads) {
    for (int i = 0; i < h.k.d_in; ++i)
      for (int j = 0; j < h.k.d_out; ++j) EXPECT_NEAR(h.k.w[size_t(i * h.k.d_out + j)], i == j ? 1.0 : 0.0, 1e-4);
    EXPECT_GT(h.k_r2_eval, 1 - 1e-8);
    EXPECT_GT(h.v_r2_eval, 1 - 1e-8);
  }
  ASSERT_EQ(test::run_command(bin + " map apply --mapper " + dir + "/id --snapshot " + dir + "/snap --target " + base +
                                  " --output " + dir + "/mapped", &out), 0) << out;
  // Every artifact comes with a bridge receipt that validates against the schema.
  for (const char* r : {"/id.receipt.json", "/ridge.receipt.json", "/mapped.receipt.json"})
    EXPECT_EQ(test::run_command(bin + " contract validate " + dir + r, &out), 0) << r << ": " << out;
  const kv::VerifiedState st = kv::open_state(dir + "/mapped", {kv::Accept::mapped});
  const kv::VerifiedState snap = kv::open_state(dir + "/snap");
  const kv::MappedProvenance& mapping = *st.header().mapping();
  EXPECT_EQ(st.cache().k, snap.cache().k);  // identity: the native bits
  EXPECT_EQ(st.cache().v, snap.cache().v);
  EXPECT_EQ(mapping.kind, "identity");
  EXPECT_EQ(mapping.mapper_hash, Mapper::read(dir + "/id").hash());
  // The relation stated at fit time travels into the mapper, the mapped cache and every receipt.
  EXPECT_EQ(Mapper::read(dir + "/id").relation, "quantization-boundary");
  EXPECT_EQ(mapping.relation, "quantization-boundary");
  for (const char* r : {"/id.receipt.json", "/ridge.receipt.json", "/mapped.receipt.json"})
    EXPECT_EQ(nlohmann::json::parse(read_file(dir + r))["translator"]["relation"], "quantization-boundary") << r;
  // map fit requires --relation; map apply refuses one that contradicts the mapper's.
  EXPECT_EQ(test::run_command(bin + " map fit --calibration " + dir + "/calib --kind identity --output " + dir + "/x", &out), 2);
  EXPECT_NE(out.find("--relation is required"), std::string::npos) << out;
  EXPECT_EQ(test::run_command(bin + " map apply --mapper " + dir + "/id --snapshot " + dir + "/snap --target " + base +
                                  " --relation cross-model --output " + dir + "/mapped2", &out), 2);
  EXPECT_NE(out.find("map apply: --relation: expected quantization-boundary (the mapper's relation), found cross-model"),
            std::string::npos) << out;
  // Replay through the CLI prints exactly the native continuation.
  ASSERT_EQ(test::run_command(bin + " map replay --mapped " + dir + "/mapped --model " + base + " -n 12", &out), 0) << out;
  auto m = model::Model::load(base);
  auto t = tok::Tokenizer::from_gguf(m->file());
  std::string expect;
  for (int32_t id : native) expect += t->token_bytes(id);
  ASSERT_GE(out.size(), expect.size() + 1);
  EXPECT_EQ(out.substr(out.size() - expect.size() - 1), expect + "\n") << out;
  EXPECT_NE(out.find("MAPPED cache"), std::string::npos) << out;
  // Issue 12, defect 4: positions past the target's context length (128) are refused before
  // anything is evaluated, unless --allow-past-context.
  EXPECT_EQ(test::run_command(bin + " map replay --mapped " + dir + "/mapped --model " + base + " -n 200", &out), 2) << out;
  EXPECT_NE(out.find("-n: steps: expected at most "), std::string::npos) << out;
  EXPECT_NE(out.find("--allow-past-context to go past it), found 200"), std::string::npos) << out;
  EXPECT_EQ(out.find("MAPPED cache"), std::string::npos) << out;
  EXPECT_EQ(test::run_command(bin + " map replay --allow-past-context --mapped " + dir + "/mapped --model " + base +
                                  " -n 200", &out), 0) << out;
  // kv compare accepts the mapped cache against the native snapshot of the same prefix, says
  // it is mapped, and (identity map) finds no difference.
  ASSERT_EQ(test::run_command(bin + " kv compare " + dir + "/snap " + dir + "/mapped --json", &out), 0) << out;
  EXPECT_NE(out.find("\"mapped\""), std::string::npos) << out;
  EXPECT_NE(out.find(mapping.mapper_hash), std::string::npos) << out;
  // A mapped cache never passes for a native snapshot.
  try {
    kv::open_state(dir + "/mapped");
    FAIL() << "a mapped cache was read as a native snapshot";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ember.kv-mapped"), std::string::npos) << e.what();
  }
  // And the mapper for another source is refused by apply.
  const std::string kjv = models() + "/stories260K-kjv-top.gguf";
  EXPECT_NE(test::run_command(bin + " map apply --mapper " + dir + "/id --snapshot " + dir + "/snap --target " + kjv +
                                  " --output " + dir + "/mapped2", &out), 0);
  EXPECT_NE(out.find("target model identity"), std::string::npos) << out;
}

TEST(MappedCache, TamperedPayloadIsRejected) {
  const std::string dir = test::temp_dir("mapped-tamper");
  export_native(dir + "/snap", "Lily wanted to play", 1);
  const std::string base = models() + "/stories260K.gguf";
  std::string out;
  auto m = model::Model::load(base);
  model::Engine e(m, {});
  auto t = tok::Tokenizer::from_gguf(m->file());
  const ModelGeometry g{m->identity(), "llama", 5, 4, 8, 64};
  identity_mapper(g, g, t->identity(), 5, "quantization-boundary").write(dir + "/id", false);
  ASSERT_EQ(test::run_command(test::ember_binary() + " map apply --mapper " + dir + "/id --snapshot " + dir +
                                  "/snap --target " + base + " --output " + dir + "/mapped", &out), 0) << out;
  {
    std::string v = read_file(dir + "/mapped/values.f16le");
    v[5] ^= 1;
    write_file_atomic(dir + "/mapped/values.f16le", v, true);
  }
  EXPECT_THROW(kv::open_state(dir + "/mapped", {kv::Accept::mapped}), Error);
}

// The mapped manifest goes through the strict parse: a duplicated key (which a plain parse
// would resolve silently to its last value) is refused, naming the key.
TEST(MappedCache, DuplicatedManifestKeyIsRejected) {
  const std::string dir = test::temp_dir("mapped-dup");
  export_native(dir + "/snap", "Lily wanted to play", 1);
  const std::string base = models() + "/stories260K.gguf";
  auto m = model::Model::load(base);
  auto t = tok::Tokenizer::from_gguf(m->file());
  const ModelGeometry g{m->identity(), "llama", 5, 4, 8, 64};
  identity_mapper(g, g, t->identity(), 5, "quantization-boundary").write(dir + "/id", false);
  std::string out;
  ASSERT_EQ(test::run_command(test::ember_binary() + " map apply --mapper " + dir + "/id --snapshot " + dir +
                                  "/snap --target " + base + " --output " + dir + "/mapped", &out), 0) << out;
  ASSERT_NO_THROW(kv::open_state(dir + "/mapped", {kv::Accept::mapped}));
  std::string text = read_file(dir + "/mapped/manifest.json");
  const size_t at = text.find('{');
  ASSERT_NE(at, std::string::npos);
  text.insert(at + 1, "\"format\": \"ember.kv-snapshot.v1\",");
  write_file_atomic(dir + "/mapped/manifest.json", text, true);
  try {
    kv::open_state(dir + "/mapped", {kv::Accept::mapped});
    ADD_FAILURE() << "accepted a duplicated key";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("format: expected a key that appears once"), std::string::npos) << e.what();
  }
}

// Defect 7: a mapper whose outputs overflow f16 (weights 1e6) made `map apply` write a cache of
// +-Inf and exit 0, and `map replay` resumed from it. The writer now refuses a non-finite
// value, naming it, and leaves neither the cache nor its receipt.
TEST(MappedCache, OverflowingMapperWritesNothing) {
  const std::string dir = test::temp_dir("mapped-overflow");
  export_native(dir + "/snap", "Lily wanted to play", 1);
  const std::string base = models() + "/stories260K.gguf";
  auto m = model::Model::load(base);
  auto t = tok::Tokenizer::from_gguf(m->file());
  const ModelGeometry g{m->identity(), "llama", 5, 4, 8, 64};
  Mapper mp = identity_mapper(g, g, t->identity(), 0, "quantization-boundary");
  mp.kind = MapperKind::ridge;
  mp.lambda = 1e-3;
  mp.split_hash = std::string(64, 'a');
  mp.calib_rows = 1;
  for (HeadMaps& h : mp.heads) {
    for (double& w : h.v.w) w *= 1e6;
    h.k_r2_train = h.k_r2_eval = h.v_r2_train = h.v_r2_eval = 0;
  }
  mp.write(dir + "/big", false);
  ASSERT_NO_THROW(Mapper::read(dir + "/big"));
  std::string out;
  EXPECT_NE(test::run_command(test::ember_binary() + " map apply --mapper " + dir + "/big --snapshot " + dir +
                                  "/snap --target " + base + " --output " + dir + "/mapped", &out), 0) << out;
  EXPECT_NE(out.find("values.f16le: payload.values: expected finite f16 values"), std::string::npos) << out;
  EXPECT_NE(out.find("Inf (f16 0x"), std::string::npos) << out;
  EXPECT_FALSE(path_exists(dir + "/mapped"));
  EXPECT_FALSE(path_exists(dir + "/mapped.receipt.json"));
}

// map replay reads through the one directory reader: a symlinked payload is refused by name
// (it was followed before), before the model is loaded.
TEST(MappedCache, MapReplayRefusesASymlinkedPayload) {
  const std::string dir = test::temp_dir("mapped-link");
  export_native(dir + "/snap", "Lily wanted to play", 1);
  const std::string base = models() + "/stories260K.gguf";
  auto m = model::Model::load(base);
  auto t = tok::Tokenizer::from_gguf(m->file());
  const ModelGeometry g{m->identity(), "llama", 5, 4, 8, 64};
  identity_mapper(g, g, t->identity(), 5, "quantization-boundary").write(dir + "/id", false);
  std::string out;
  ASSERT_EQ(test::run_command(test::ember_binary() + " map apply --mapper " + dir + "/id --snapshot " + dir +
                                  "/snap --target " + base + " --output " + dir + "/mapped", &out), 0) << out;
  ASSERT_EQ(test::run_command(test::ember_binary() + " map replay --mapped " + dir + "/mapped --model " + base + " -n 2", &out), 0) << out;
  ASSERT_EQ(std::rename((dir + "/mapped/keys.f16le").c_str(), (dir + "/keys.elsewhere").c_str()), 0);
  ASSERT_EQ(::symlink("../keys.elsewhere", (dir + "/mapped/keys.f16le").c_str()), 0);
  EXPECT_NE(test::run_command(test::ember_binary() + " map replay --mapped " + dir + "/mapped --model " + base + " -n 2", &out), 0);
  EXPECT_NE(out.find("keys.f16le: payload.keys: expected a regular file, found a symbolic link"), std::string::npos) << out;
}

}  // namespace
}  // namespace ember::map
