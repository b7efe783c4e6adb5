// config.json of a Hugging Face checkpoint (hf/checkpoint.h): defaults as transformers'
// config classes have them, and each field the conversion relies on refused by name.
// End-to-end conversion is tested in python/tests/test_import_hf.py against the torch reference.
#include <gtest/gtest.h>

#include "hf/checkpoint.h"
#include "support/test_support.h"
#include "util/atomic_file.h"

namespace ember::hf {
namespace {

std::string config_file(const std::string& text) {
  static int n = 0;
  const std::string p = test::temp_dir("hfcfg") + "/c" + std::to_string(n++) + ".json";
  write_file_atomic(p, text, false);
  return p;
}

const char* kBase = R"({"model_type":"qwen2","hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,
  "num_key_value_heads":2,"intermediate_size":128,"vocab_size":300,"rms_norm_eps":1e-6,"rope_theta":1000000.0,
  "tie_word_embeddings":true,"torch_dtype":"float32","some_unrelated_field":[1,2]})";

TEST(HfConfig, ReadsTheFieldsAndDefaults) {
  const HfConfig c = read_config(config_file(kBase));
  EXPECT_EQ(c.arch, "qwen2");
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.kv_heads, 2);
  EXPECT_EQ(c.context, 2048);  // max_position_embeddings absent
  EXPECT_TRUE(c.tied);
  EXPECT_TRUE(c.qkv_bias);  // qwen2 always has Q/K/V biases
  const HfConfig l = read_config(config_file(
      R"({"model_type":"llama","hidden_size":64,"num_hidden_layers":1,"num_attention_heads":8,"intermediate_size":172,
          "vocab_size":512,"rms_norm_eps":1e-5})"));
  EXPECT_EQ(l.kv_heads, 8);
  EXPECT_EQ(l.rope_theta, 10000.0);
  EXPECT_FALSE(l.tied);
  EXPECT_FALSE(l.qkv_bias);
}

TEST(HfConfig, RefusesNamingTheField) {
  const std::string base = kBase;
  auto with = [&](const std::string& extra) {
    std::string t = base;
    t.insert(1, extra + ",");
    return test::error_of([&] { read_config(config_file(t)); });
  };
  EXPECT_NE(with(R"("rope_scaling":{"type":"linear","factor":2.0})").find("rope_scaling: expected null"), std::string::npos);
  EXPECT_NE(with(R"("hidden_act":"gelu")").find("hidden_act: expected \"silu\""), std::string::npos);
  EXPECT_NE(with(R"("architectures":["LlamaForCausalLM"])").find("architectures: expected [\"Qwen2ForCausalLM\"]"),
            std::string::npos);
  EXPECT_NE(with(R"("mlp_bias":true)").find("mlp_bias"), std::string::npos);
  EXPECT_NE(with(R"("hidden_size":64)").find("hidden_size"), std::string::npos);  // duplicated key
  EXPECT_NE(test::error_of([] { read_config(config_file(R"({"model_type":"gemma"})")); }).find("model_type: expected llama|qwen2|qwen3"),
            std::string::npos);
  EXPECT_NE(test::error_of([] { read_config(config_file(R"({"model_type":"llama","hidden_size":"64"})")); }).find("hidden_size"),
            std::string::npos);
}

// Issue 35, item 3: rope_theta 1e39 and rms_norm_eps 1e-50 passed the check on the double and
// became inf and 0 in the GGUF's f32, which ember then refused to load (the import exited 0).
// Checked failing before: read_config accepted both.
TEST(HfConfig, RangesAreCheckedOnTheF32TheGgufStores) {
  auto with = [](const std::string& from, const std::string& to) {
    std::string t = kBase;
    t.replace(t.find(from), from.size(), to);
    return test::error_of([&] { read_config(config_file(t)); });
  };
  const std::string theta = with("\"rope_theta\":1000000.0", "\"rope_theta\":1e39");
  EXPECT_NE(theta.find(": rope_theta: expected a number > 1, finite as f32 (at most 3.4e38; GGUF stores it as f32), "
                       "found 1e+39 (inf as f32)"),
            std::string::npos)
      << theta;
  const std::string eps = with("\"rms_norm_eps\":1e-6", "\"rms_norm_eps\":1e-50");
  EXPECT_NE(eps.find(": rms_norm_eps: expected a number in (0, 1), non-zero as f32 (GGUF stores it as f32), found "
                     "1e-50 (0 as f32)"),
            std::string::npos)
      << eps;
  EXPECT_NE(with("\"rms_norm_eps\":1e-6", "\"rms_norm_eps\":-1").find("rms_norm_eps: expected"), std::string::npos);
  EXPECT_NE(with("\"rope_theta\":1000000.0", "\"rope_theta\":0.5").find("found 0.5"), std::string::npos);
  // The largest values f32 holds still pass.
  EXPECT_EQ(with("\"rope_theta\":1000000.0", "\"rope_theta\":3e38"), "");
  EXPECT_EQ(with("\"rms_norm_eps\":1e-6", "\"rms_norm_eps\":1e-40"), "");
}

}  // namespace
}  // namespace ember::hf
