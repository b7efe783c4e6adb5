// ModelConfig::from_gguf: features detected from the tensors, and one-line errors naming the
// file and the key or tensor for anything missing or inconsistent.
#include <gtest/gtest.h>

#include <string>

#include "gguf/identity.h"
#include "gguf/writer.h"
#include "model/config.h"
#include "model/engine.h"
#include "model/rope.h"
#include "model/tiny_model.h"
#include "support/test_support.h"
#include "util/byte_io.h"
#include "util/error.h"

namespace ember::model {
namespace {

using test::error_of;

// Rewrites a tiny model's metadata/tensors through `edit` and parses the result.
gguf::GgufFile edited(const test::TinySpec& spec,
                      const std::function<void(gguf::GgufWriter&, const gguf::GgufFile&)>& edit,
                      const std::function<bool(const std::string&)>& keep_tensor = {}) {
  const gguf::GgufFile src = test::make_tiny_gguf(spec);
  gguf::GgufWriter w;
  w.copy_metadata(src);
  for (const auto& t : src.tensors()) {
    if (keep_tensor && !keep_tensor(t.name)) continue;
    w.add_tensor(t.name, t.shape, t.type, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
  }
  edit(w, src);
  auto bytes = std::make_shared<std::vector<uint8_t>>();
  BufferSink sink(*bytes);
  w.write(sink);
  return gguf::GgufFile::parse(bytes, "edited.gguf");
}

TEST(Config, Stories260K) {
  const auto f = gguf::GgufFile::open(test::shared_path("models/stories260K.gguf"));
  const ModelConfig c = ModelConfig::from_gguf(f);
  EXPECT_EQ(c.arch, Arch::llama);
  EXPECT_EQ(c.n_layers, 5);
  EXPECT_EQ(c.n_embd, 64);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.n_ff, 172);
  EXPECT_EQ(c.n_vocab, 512);
  EXPECT_EQ(c.rope_layout, RopeLayout::normal);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_FALSE(c.tied_output);  // the converter stores output.weight as a copy
  EXPECT_FLOAT_EQ(c.rope_theta, 10000.0f);
}

TEST(Config, SyntheticQwen2) {
  const auto f = gguf::GgufFile::open(test::shared_path("models/synthetic/qwen2-bias-s5006.F32.gguf"));
  const ModelConfig c = ModelConfig::from_gguf(f);
  EXPECT_EQ(c.arch, Arch::qwen2);
  EXPECT_EQ(c.rope_layout, RopeLayout::neox);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_TRUE(c.tied_output);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_FLOAT_EQ(c.rope_theta, 1e6f);
}

TEST(Config, FeaturesFromTensors) {
  test::TinySpec s;
  s.arch = "qwen3";
  s.qk_norm = true;
  s.head_dim = 128;
  const ModelConfig c = ModelConfig::from_gguf(test::make_tiny_gguf(s));
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.rope_layout, RopeLayout::neox);
  s = {};
  s.rope_scaling = "llama3";
  const ModelConfig l3 = ModelConfig::from_gguf(test::make_tiny_gguf(s));
  EXPECT_EQ(l3.rope_scaling.type, "llama3");
  EXPECT_EQ(l3.rope_scaling.original_context, 64);
  EXPECT_FLOAT_EQ(l3.rope_scaling.factor, 8.0f);
}

TEST(Config, ErrorsNameTheFileAndTheKey) {
  test::TinySpec s;
  auto missing = error_of([&] {
    ModelConfig::from_gguf(edited(s, [](gguf::GgufWriter& w, const gguf::GgufFile&) {
      w.remove("llama.block_count");
    }));
  });
  EXPECT_NE(missing.find("edited.gguf"), std::string::npos) << missing;
  EXPECT_NE(missing.find("llama.block_count"), std::string::npos) << missing;

  auto arch = error_of([&] {
    ModelConfig::from_gguf(edited(s, [](gguf::GgufWriter& w, const gguf::GgufFile&) {
      w.set_string("general.architecture", "gemma2");
    }));
  });
  EXPECT_NE(arch.find("general.architecture"), std::string::npos) << arch;
  EXPECT_NE(arch.find("gemma2"), std::string::npos) << arch;

  auto kv = error_of([&] {
    ModelConfig::from_gguf(edited(s, [](gguf::GgufWriter& w, const gguf::GgufFile&) {
      w.set_u32("llama.attention.head_count_kv", 3);
    }));
  });
  EXPECT_NE(kv.find("head_count_kv"), std::string::npos) << kv;

  auto tensor = error_of([&] {
    ModelConfig::from_gguf(edited(s, [](gguf::GgufWriter&, const gguf::GgufFile&) {},
                                  [](const std::string& n) { return n != "blk.1.ffn_up.weight"; }));
  });
  EXPECT_NE(tensor.find("blk.1.ffn_up.weight"), std::string::npos) << tensor;

  auto shape = error_of([&] {
    ModelConfig::from_gguf(edited(s, [](gguf::GgufWriter& w, const gguf::GgufFile&) {
      w.set_u32("llama.feed_forward_length", 256);
    }));
  });
  EXPECT_NE(shape.find("ffn_gate.weight"), std::string::npos) << shape;

  test::TinySpec q3;
  q3.arch = "qwen3";
  q3.qk_norm = true;
  auto qk = error_of([&] {
    ModelConfig::from_gguf(edited(q3, [](gguf::GgufWriter&, const gguf::GgufFile&) {},
                                  [](const std::string& n) {
                                    return n.find("attn_q_norm") == std::string::npos &&
                                           n.find("attn_k_norm") == std::string::npos;
                                  }));
  });
  EXPECT_NE(qk.find("attn_q_norm"), std::string::npos) << qk;

  auto scaling = error_of([&] {
    ModelConfig::from_gguf(edited(s, [](gguf::GgufWriter& w, const gguf::GgufFile&) {
      w.set_string("llama.rope.scaling.type", "yarn");
    }));
  });
  EXPECT_NE(scaling.find("rope.scaling.type"), std::string::npos) << scaling;
  EXPECT_NE(scaling.find("yarn"), std::string::npos) << scaling;
}

TEST(Config, ModelLoadIgnoresExtraTensors) {
  test::TinySpec s;
  auto f = edited(s, [](gguf::GgufWriter& w, const gguf::GgufFile&) {
    w.add_tensor("unused.weight", {4}, gguf::TensorType::F32, std::vector<uint8_t>(16));
  });
  EXPECT_NO_THROW(Model::load(f));  // extra tensors are ignored
}

TEST(Rope, InverseUndoesRotationAndPositionZeroIsIdentity) {
  for (const char* arch : {"llama", "qwen2"}) {
    test::TinySpec s;
    s.arch = arch;
    const ModelConfig c = ModelConfig::from_gguf(test::make_tiny_gguf(s));
    std::vector<float> head(size_t(c.head_dim));
    for (size_t i = 0; i < head.size(); ++i) head[i] = float(i) * 0.25f - 3.0f;
    std::vector<float> x = head;
    apply_rope(c, 0, x.data(), false);
    EXPECT_EQ(x, head);
    apply_rope(c, 1234, x.data(), false);
    EXPECT_NE(x, head);
    apply_rope(c, 1234, x.data(), true);
    for (size_t i = 0; i < head.size(); ++i) EXPECT_NEAR(x[i], head[i], 1e-5);
  }
}

}  // namespace
}  // namespace ember::model

namespace ember::model {
namespace {
TEST(ModelIdentity, IsTheGgufModelIdentity) {
  const auto f = gguf::GgufFile::open(test::shared_path("models/stories260K.gguf"));
  auto m = Model::load(f);
  EXPECT_EQ(m->identity(), gguf::model_identity(f).hex());
  EXPECT_NE(m->identity(), Model::load(test::shared_path("models/stories260K-Q8_0.gguf"))->identity());
}
}  // namespace
}  // namespace ember::model
