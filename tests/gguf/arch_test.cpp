// The architecture table (gguf/arch.h): names, keys and tensor names as llama.cpp spells them,
// the Hugging Face names, the joined lists the CLI and errors print, and the closed lists
// outside C++ (the JSON Schemas' "arch" enums) agreeing with it.
#include <gtest/gtest.h>

#include <functional>

#include <nlohmann/json.hpp>

#include "gguf/arch.h"
#include "support/test_support.h"
#include "util/atomic_file.h"

namespace ember::gguf {
namespace {

TEST(Arch, RowsInEnumOrderAndLookups) {
  ASSERT_EQ(archs().size(), 3u);
  for (size_t i = 0; i < archs().size(); ++i) {
    EXPECT_EQ(size_t(archs()[i].arch), i);
    EXPECT_EQ(find_arch(archs()[i].name), &archs()[i]);
    EXPECT_EQ(parse_arch(archs()[i].name), archs()[i].arch);
  }
  EXPECT_EQ(find_arch("gpt2"), nullptr);
  EXPECT_EQ(test::error_of([] { parse_arch("gpt2"); }),
            "architecture: name: expected llama, qwen2 or qwen3, found 'gpt2'");
  EXPECT_STREQ(arch_info(Arch::qwen3).hf_class, "Qwen3ForCausalLM");
  EXPECT_EQ(arch_info(Arch::llama).rope_layout, RopeLayout::normal);
  EXPECT_EQ(arch_info(Arch::qwen2).rope_layout, RopeLayout::neox);
}

TEST(Arch, JoinedNames) {
  EXPECT_EQ(arch_names("|"), "llama|qwen2|qwen3");
  EXPECT_EQ(arch_names(", ", " or "), "llama, qwen2 or qwen3");
  EXPECT_EQ(arch_names(", ", " or ", [](const ArchInfo& a) { return a.qkv_bias != Feature::forbidden; }),
            "llama or qwen2");
  EXPECT_EQ(arch_names("|", {}, [](const ArchInfo& a) { return a.qk_norm == Feature::required; }), "qwen3");
}

TEST(Arch, KeysAndTensorNamesAsLlamaCppSpellsThem) {
  EXPECT_EQ(key("qwen2", Key::head_count), "qwen2.attention.head_count");
  EXPECT_EQ(key("llama", Key::rms_eps), "llama.attention.layer_norm_rms_epsilon");
  EXPECT_EQ(key("qwen3", Key::rope_scaling_original_context), "qwen3.rope.scaling.original_context_length");
  EXPECT_EQ(tensor_name(Tensor::token_embd), "token_embd.weight");
  EXPECT_EQ(tensor_name(Tensor::attn_q, 3, "bias"), "blk.3.attn_q.bias");
  EXPECT_EQ(tensor_name(Tensor::ffn_down, 0), "blk.0.ffn_down.weight");
  EXPECT_EQ(hf_tensor_name(Tensor::attn_q, 3, "bias"), "model.layers.3.self_attn.q_proj.bias");
  EXPECT_EQ(hf_tensor_name(Tensor::output), "lm_head.weight");
  EXPECT_EQ(hf_tensor_name(Tensor::ffn_norm, 1), "model.layers.1.post_attention_layernorm.weight");
}

// The schemas are data the Python tests also read, so they cannot include the table: this
// test is what keeps their closed "arch" lists equal to it.
TEST(Arch, TheSchemasListTheTablesArchitectures) {
  nlohmann::json names = nlohmann::json::array();
  for (const ArchInfo& a : archs()) names.push_back(a.name);
  int found = 0;
  for (const char* schema : {"bridge-receipt", "parity-receipt", "translator-registry"}) {
    const nlohmann::json j = nlohmann::json::parse(
        read_file(std::string(EMBER_SOURCE_DIR) + "/schemas/" + schema + ".schema.json"));
    // Every {"arch": {"enum": [...]}} anywhere in the schema.
    std::function<void(const nlohmann::json&)> walk = [&](const nlohmann::json& v) {
      if (v.is_object() && v.contains("arch") && v["arch"].is_object() && v["arch"].contains("enum")) {
        EXPECT_EQ(v["arch"]["enum"], names) << schema;
        ++found;
      }
      if (v.is_structured())
        for (const auto& x : v) walk(x);  // an object's values, an array's elements
    };
    walk(j);
  }
  EXPECT_GE(found, 3);
}

}  // namespace
}  // namespace ember::gguf
