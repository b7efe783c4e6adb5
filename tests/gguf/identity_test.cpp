// Model identity: depends on architecture metadata and tensor bytes only.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "gguf/identity.h"
#include "gguf/synth.h"
#include "gguf_fixture.h"
#include "support/test_support.h"

namespace ember::gguf {
namespace {

GgufFile synth_file() {
  SynthSpec s;
  s.arch = "qwen2";
  s.layers = 1, s.hidden = 32, s.heads = 2, s.kv_heads = 1, s.ffn = 64, s.vocab = 260;
  s.qkv_bias = true, s.seed = 5;
  return fixture::parse_bytes(fixture::to_bytes(synth_model(s)));
}

// Rewrites a file with its metadata and tensors in the order and with the edits given.
GgufFile rewrite(const GgufFile& f, bool reverse_metadata, bool reverse_tensors,
                 const std::function<void(GgufWriter&)>& edit = {}) {
  GgufWriter w;
  auto md = f.metadata();
  if (reverse_metadata) std::reverse(md.begin(), md.end());
  for (const auto& [k, v] : md) w.set(k, v);
  std::vector<const TensorInfo*> ts;
  for (const auto& t : f.tensors()) ts.push_back(&t);
  if (reverse_tensors) std::reverse(ts.begin(), ts.end());
  for (const TensorInfo* t : ts)
    w.add_tensor(t->name, t->shape, t->type, std::vector<uint8_t>(t->data, t->data + t->n_bytes));
  if (edit) edit(w);
  return fixture::parse_bytes(fixture::to_bytes(w), "other-name.gguf");
}

TEST(Identity, IndependentOfNameOrderAndUnrelatedMetadata) {
  const GgufFile f = synth_file();
  const std::string id = model_identity(f).hex();
  EXPECT_EQ(id.size(), 64u);
  EXPECT_EQ(model_identity(rewrite(f, true, true)).hex(), id);
  EXPECT_EQ(model_identity(rewrite(f, false, false, [](GgufWriter& w) {
              w.set_string("general.name", "renamed");
              w.set_string("tokenizer.ggml.pre", "something-else");
              w.set_u32("general.alignment", 64);
            })).hex(),
            id);
  // The integer width a converter chose does not matter, the value does.
  EXPECT_EQ(model_identity(rewrite(f, false, false, [](GgufWriter& w) {
              w.set("qwen2.block_count", Value::of_i64(1));
            })).hex(),
            id);
  // The same file on disk under two names.
  const std::string dir = ember::test::temp_dir("identity");
  GgufWriter w;
  w.copy_metadata(f);
  for (const auto& t : f.tensors())
    w.add_tensor(t.name, t.shape, t.type, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
  w.write_file(dir + "/a.gguf", false);
  w.write_file(dir + "/b.gguf", false);
  EXPECT_EQ(model_identity(GgufFile::open(dir + "/a.gguf")).hex(), id);
  EXPECT_EQ(model_identity(GgufFile::open(dir + "/b.gguf")).hex(), id);
}

TEST(Identity, ChangesWithArchitectureMetadataOrAnyTensorByte) {
  const GgufFile f = synth_file();
  const ModelIdentity id = model_identity(f);
  const ModelIdentity theta = model_identity(rewrite(f, false, false, [](GgufWriter& w) {
    w.set_f32("qwen2.rope.freq_base", 10000.0f);
  }));
  EXPECT_NE(theta.hex(), id.hex());
  EXPECT_NE(theta.architecture, id.architecture);
  EXPECT_EQ(theta.tensors, id.tensors);
  const ModelIdentity added = model_identity(rewrite(f, false, false, [](GgufWriter& w) {
    w.set_u32("qwen2.new_key", 1);
  }));
  EXPECT_NE(added.hex(), id.hex());
  // One flipped bit in one tensor.
  GgufWriter w;
  w.copy_metadata(f);
  for (const auto& t : f.tensors()) {
    std::vector<uint8_t> b(t.data, t.data + t.n_bytes);
    if (t.name == "blk.0.ffn_up.weight") b[100] ^= 1;
    w.add_tensor(t.name, t.shape, t.type, std::move(b));
  }
  const GgufFile g = fixture::parse_bytes(fixture::to_bytes(w));
  const ModelIdentity flipped = model_identity(g);
  EXPECT_NE(flipped.hex(), id.hex());
  EXPECT_EQ(flipped.architecture, id.architecture);
  EXPECT_NE(tensor_hash(g.tensor("blk.0.ffn_up.weight")), tensor_hash(f.tensor("blk.0.ffn_up.weight")));
  EXPECT_EQ(tensor_hash(g.tensor("blk.0.ffn_gate.weight")),
            tensor_hash(f.tensor("blk.0.ffn_gate.weight")));
  EXPECT_EQ(identity_metadata_keys(f).front(), "general.architecture");
}

TEST(Identity, SharedLowerLayersOfTheKjvFineTune) {
  // models/README.md: token_embd, output and blk.0.*, blk.1.* are byte-identical between
  // stories260K and stories260K-kjv-top; output_norm and blk.2-4.* differ.
  const GgufFile base = GgufFile::open(ember::test::shared_path("models/stories260K.gguf"));
  const GgufFile tuned = GgufFile::open(ember::test::shared_path("models/stories260K-kjv-top.gguf"));
  int same = 0;
  for (const TensorInfo& t : base.tensors()) {
    const bool shared = t.name == "token_embd.weight" || t.name == "output.weight" ||
                        t.name.rfind("blk.0.", 0) == 0 || t.name.rfind("blk.1.", 0) == 0;
    const bool equal = tensor_hash(t) == tensor_hash(tuned.tensor(t.name));
    EXPECT_EQ(equal, shared) << t.name;
    same += equal;
  }
  EXPECT_EQ(same, 20);
  EXPECT_NE(model_identity(base).hex(), model_identity(tuned).hex());
  EXPECT_EQ(model_identity(base).architecture, model_identity(tuned).architecture);
}

}  // namespace
}  // namespace ember::gguf
