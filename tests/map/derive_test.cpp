// `ember model synth --derive-from BASE --share-layers S` (gguf::derive_model): the derived
// model keeps the embeddings and layers < S byte for byte and re-draws the rest, so
// map::shared_layers finds exactly S, and the exact hybrid at boundary S on the pair gives the
// target's own full-prefill logits bit for bit.
#include <gtest/gtest.h>

#include <cstring>

#include "gguf/gguf_file.h"
#include "gguf/identity.h"
#include "gguf/synth.h"
#include "map/hybrid.h"
#include "map/shared.h"
#include "model/engine.h"
#include "support/test_support.h"

namespace ember::map {
namespace {

gguf::SynthSpec base_spec() {
  gguf::SynthSpec s;
  s.arch = "qwen2";
  s.layers = 4, s.hidden = 64, s.heads = 4, s.kv_heads = 2, s.ffn = 96, s.vocab = 300;
  s.qkv_bias = true, s.tied = false, s.type = gguf::TensorType::Q8_0, s.seed = 7;
  return s;
}

TEST(Derive, KeepsTheLowerLayersByteForByteAndRedrawsTheRest) {
  const std::string dir = test::temp_dir("derive");
  const std::string base_path = dir + "/base.gguf", derived_path = dir + "/derived.gguf";
  gguf::synth_model(base_spec()).write_file(base_path, true);
  const gguf::GgufFile base = gguf::GgufFile::open(base_path);
  gguf::derive_model(base, 2, 7).write_file(derived_path, true);  // the base's own seed: still differs (salted)
  const gguf::GgufFile derived = gguf::GgufFile::open(derived_path);
  ASSERT_EQ(derived.tensors().size(), base.tensors().size());
  int kept = 0, redrawn = 0;
  for (const gguf::TensorInfo& t : base.tensors()) {
    const gguf::TensorInfo& d = derived.tensor(t.name);
    EXPECT_EQ(d.shape, t.shape) << t.name;
    EXPECT_EQ(d.type, t.type) << t.name;
    const bool shared = t.name == "token_embd.weight" || t.name.rfind("blk.0.", 0) == 0 || t.name.rfind("blk.1.", 0) == 0;
    const bool same = d.n_bytes == t.n_bytes && std::memcmp(d.data, t.data, t.n_bytes) == 0;
    EXPECT_EQ(same, shared) << t.name;
    (shared ? kept : redrawn) += 1;
  }
  EXPECT_GT(kept, 10);
  EXPECT_GT(redrawn, 10);
  EXPECT_NE(gguf::model_identity(base).hex(), gguf::model_identity(derived).hex());
  EXPECT_EQ(derived.get_int("ember.derive.share_layers"), 2);

  auto src = model::Model::load(base_path), tgt = model::Model::load(derived_path);
  const SharedLayers sl = shared_layers(src->file(), src->config(), tgt->file(), tgt->config());
  EXPECT_EQ(sl.layers, 2);
  EXPECT_EQ(sl.first_diff.rfind("blk.2.", 0), 0u) << sl.first_diff;

  // The exact hybrid at boundary 2 is bit-identical to the target's full prefill.
  model::Engine se(src, {}), te(tgt, {2});
  const std::vector<int32_t> ids = {1, 40, 77, 203, 9, 150, 291, 3, 64, 120, 17};
  HybridRun run = run_hybrid(se, te, *src, *tgt, nullptr, ids, -1, "test");
  EXPECT_EQ(run.s, 2);
  EXPECT_EQ(run.a, 2);
  const std::vector<float> hybrid = te.forward(run.cache, std::span<const int32_t>(&run.resume_token, 1));
  const FullPrefillReference ref = full_prefill_reference(te, ids, 1, [](int32_t) { return false; });
  ASSERT_EQ(hybrid.size(), ref.first_logits.size());
  EXPECT_EQ(std::memcmp(hybrid.data(), ref.first_logits.data(), hybrid.size() * sizeof(float)), 0);
  // ... and the source's own logits are not (the upper layers really differ).
  model::KvCache sc = se.new_cache(int(ids.size()));
  const std::vector<float> source_logits = se.forward(sc, ids);
  EXPECT_NE(std::memcmp(source_logits.data(), ref.first_logits.data(), hybrid.size() * sizeof(float)), 0);
}

TEST(Derive, RefusesAShareCountOutsideTheModel) {
  const std::string dir = test::temp_dir("derive-bad");
  gguf::synth_model(base_spec()).write_file(dir + "/base.gguf", true);
  const gguf::GgufFile base = gguf::GgufFile::open(dir + "/base.gguf");
  EXPECT_NE(test::error_of([&] { gguf::derive_model(base, 5, 1); }).find("--share-layers: expected in [0, 4]"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] { gguf::derive_model(base, -1, 1); }).find("--share-layers"), std::string::npos);
}

TEST(Derive, TheCommandWritesThePairAndRefusesGeometryFlags) {
  const std::string dir = test::temp_dir("derive-cli");
  const std::string e = test::ember_binary();
  std::string out;
  ASSERT_EQ(test::run_command(e + " model synth --arch llama --layers 3 --hidden 32 --heads 4 --kv-heads 2 --ffn 64 "
                                  "--vocab 300 --seed 3 -o " + dir + "/b.gguf", &out), 0) << out;
  ASSERT_EQ(test::run_command(e + " model synth --derive-from " + dir + "/b.gguf --share-layers 1 --seed 9 -o " + dir +
                                  "/d.gguf", &out), 0) << out;
  EXPECT_NE(out.find("shares embeddings and layers < 1"), std::string::npos) << out;
  auto b = model::Model::load(dir + "/b.gguf"), d = model::Model::load(dir + "/d.gguf");
  EXPECT_EQ(shared_layers(b->file(), b->config(), d->file(), d->config()).layers, 1);
  EXPECT_NE(test::run_command(e + " model synth --derive-from " + dir + "/b.gguf --share-layers 1 --layers 2 --seed 9 -o " +
                                  dir + "/x.gguf", &out), 0);
  EXPECT_NE(out.find("--layers: expected not given with --derive-from"), std::string::npos) << out;
}

}  // namespace
}  // namespace ember::map
