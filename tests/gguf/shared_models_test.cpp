// Every GGUF file in ../shared/models (written by llama.cpp's tools) parses, and its geometry
// and tensor types are what models/README.md says.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "gguf/dequantize.h"
#include "gguf/gguf_file.h"
#include "support/test_support.h"

namespace ember::gguf {
namespace {

struct Geometry {
  const char* file;
  const char* arch;
  int64_t hidden, layers, heads, kv_heads, ffn, vocab;
  bool has_output;                  // false: tied to token_embd
  std::set<std::string> types;      // tensor types the README lists
};

const Geometry kModels[] = {
    {"models/stories260K.gguf", "llama", 64, 5, 8, 4, 172, 512, true, {"f32"}},
    {"models/stories260K-F16.gguf", "llama", 64, 5, 8, 4, 172, 512, true, {"f16", "f32"}},
    {"models/stories260K-Q8_0.gguf", "llama", 64, 5, 8, 4, 172, 512, true, {"q8_0", "f16", "f32"}},
    {"models/stories260K-Q4_0.gguf", "llama", 64, 5, 8, 4, 172, 512, true,
     {"q4_0", "q8_0", "f16", "f32"}},
    {"models/stories260K-Q4_K_M.gguf", "llama", 64, 5, 8, 4, 172, 512, true,
     {"q5_0", "q8_0", "f16", "f32"}},
    {"models/stories260K-kjv-top.gguf", "llama", 64, 5, 8, 4, 172, 512, true, {"f32"}},
    {"models/stories260K-kjv-top-Q8_0.gguf", "llama", 64, 5, 8, 4, 172, 512, true,
     {"q8_0", "f16", "f32"}},
    {"models/synthetic/llama-gqa-s5005.F32.gguf", "llama", 256, 4, 8, 2, 768, 512, true, {"f32"}},
    {"models/synthetic/llama-gqa-s5005.Q4_K_M.gguf", "llama", 256, 4, 8, 2, 768, 512, true,
     {"q4_K", "q6_K", "f32"}},
    {"models/synthetic/llama-gqa-s5005.Q5_K_M.gguf", "llama", 256, 4, 8, 2, 768, 512, true,
     {"q5_K", "q6_K", "f32"}},
    {"models/synthetic/llama-gqa-s5005.Q6_K.gguf", "llama", 256, 4, 8, 2, 768, 512, true,
     {"q6_K", "f32"}},
    {"models/synthetic/qwen2-bias-s5006.F32.gguf", "qwen2", 256, 4, 4, 2, 512, 512, false, {"f32"}},
    {"models/synthetic/qwen2-bias-s5006.Q8_0.gguf", "qwen2", 256, 4, 4, 2, 512, 512, false,
     {"q8_0", "f32"}},
    {"models/synthetic/qwen2-bias-s5006.Q4_K_M.gguf", "qwen2", 256, 4, 4, 2, 512, 512, false,
     {"q4_K", "q6_K", "f32"}},
};

TEST(SharedModels, ParseWithTheReadmeGeometry) {
  for (const Geometry& g : kModels) {
    SCOPED_TRACE(g.file);
    const GgufFile f = GgufFile::open(test::shared_path(g.file));
    const std::string a = g.arch;
    EXPECT_EQ(f.get_string("general.architecture"), a);
    EXPECT_EQ(f.get_int(a + ".embedding_length"), g.hidden);
    EXPECT_EQ(f.get_int(a + ".block_count"), g.layers);
    EXPECT_EQ(f.get_int(a + ".attention.head_count"), g.heads);
    EXPECT_EQ(f.get_int(a + ".attention.head_count_kv"), g.kv_heads);
    EXPECT_EQ(f.get_int(a + ".feed_forward_length"), g.ffn);
    EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens").size(), size_t(g.vocab));
    const TensorInfo& emb = f.tensor("token_embd.weight");
    EXPECT_EQ(emb.shape, (std::vector<uint64_t>{uint64_t(g.hidden), uint64_t(g.vocab)}));
    EXPECT_EQ(f.find_tensor("output.weight") != nullptr, g.has_output);
    // 2 norms per layer + 7 matrices, token_embd, output_norm, output; qwen2 adds 3 biases.
    const size_t per_layer = 9 + (a == "qwen2" ? 3 : 0);
    EXPECT_EQ(f.tensors().size(), g.layers * per_layer + 2 + (g.has_output ? 1 : 0));
    const TensorInfo& q = f.tensor("blk.0.attn_q.weight");
    EXPECT_EQ(q.shape, (std::vector<uint64_t>{uint64_t(g.hidden), uint64_t(g.hidden)}));
    const TensorInfo& k = f.tensor("blk.0.attn_k.weight");
    EXPECT_EQ(k.shape[1], uint64_t(g.hidden / g.heads * g.kv_heads));
    EXPECT_EQ(f.tensor("blk.0.ffn_down.weight").shape,
              (std::vector<uint64_t>{uint64_t(g.ffn), uint64_t(g.hidden)}));
    std::set<std::string> types;
    for (const TensorInfo& t : f.tensors()) {
      types.insert(type_name(uint32_t(t.type)));
      EXPECT_LE(f.data_offset() + t.offset + t.n_bytes, f.file_size()) << t.name;
      if (t.shape.size() == 1) {
        EXPECT_EQ(t.type, TensorType::F32) << t.name;  // norms, biases
      }
    }
    EXPECT_EQ(types, g.types);
  }
}

TEST(SharedModels, EveryTensorDequantizes) {
  // Per-type accuracy against the F32 originals is tested with the kernels (quantize tests);
  // here: every tensor of every file decodes to the right number of finite values, and the
  // F32 tensors decode to exactly their bytes.
  for (const Geometry& g : kModels) {
    SCOPED_TRACE(g.file);
    const GgufFile f = GgufFile::open(test::shared_path(g.file));
    for (const TensorInfo& t : f.tensors()) {
      const std::vector<float> v = dequantize_tensor(t);
      ASSERT_EQ(v.size(), t.n_elements()) << t.name;
      size_t finite = 0;
      double sum_sq = 0;
      for (float x : v) {
        finite += std::isfinite(x);
        sum_sq += double(x) * x;
      }
      EXPECT_EQ(finite, v.size()) << t.name;
      EXPECT_GT(sum_sq, 0.0) << t.name;  // no tensor in these models is all zeros
      if (t.type == TensorType::F32) {
        EXPECT_EQ(std::memcmp(v.data(), t.data, t.n_bytes), 0) << t.name;
      }
    }
  }
}

TEST(SharedModels, StoriesMetadataMatchesTheReadme) {
  const GgufFile f = GgufFile::open(test::shared_path("models/stories260K.gguf"));
  EXPECT_EQ(f.get_int("llama.context_length"), 128);  // the converter's value (README notes)
  EXPECT_FLOAT_EQ(float(f.get_float("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f.get_int("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(f.get_int("tokenizer.ggml.eos_token_id"), 2);
  const GgufFile q = GgufFile::open(test::shared_path("models/synthetic/qwen2-bias-s5006.F32.gguf"));
  EXPECT_EQ(q.get_float("qwen2.rope.freq_base"), 1e6);
  EXPECT_TRUE(q.find_tensor("blk.3.attn_v.bias") != nullptr);
}

}  // namespace
}  // namespace ember::gguf
