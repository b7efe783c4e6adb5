// The bytes of `ember model import-hf` output, pinned for each architecture (llama with and
// without attention_bias, qwen2, qwen3 with an explicit head_dim), from tiny checkpoints built
// here. Recorded before the architecture table (gguf/arch.h) took over the metadata block and
// the tensor names; a change here changes every imported model and its identity.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "hf/checkpoint.h"
#include "support/test_support.h"
#include "util/atomic_file.h"
#include "util/byte_io.h"
#include "util/safetensors.h"
#include "util/sha256.h"

namespace ember::hf {
namespace {

struct Geometry {
  std::string arch;
  int hidden = 32, layers = 2, heads = 4, kv_heads = 2, head_dim = 0, ffn = 48, vocab = 64;
  bool bias = false, tied = false;
};

// A checkpoint whose every value is a fixed function of the tensor's index and position.
std::string write_checkpoint(const Geometry& g, const std::string& tag) {
  // A fixed directory name: general.name is taken from it (config.json has no _name_or_path).
  const std::string dir = test::temp_dir("hfpin") + "/" + tag;
  std::filesystem::create_directories(dir);
  const int hd = g.head_dim ? g.head_dim : g.hidden / g.heads;
  std::string cfg = "{\"model_type\":\"" + g.arch + "\",\"hidden_size\":" + std::to_string(g.hidden) +
                    ",\"num_hidden_layers\":" + std::to_string(g.layers) +
                    ",\"num_attention_heads\":" + std::to_string(g.heads) +
                    ",\"num_key_value_heads\":" + std::to_string(g.kv_heads) +
                    ",\"intermediate_size\":" + std::to_string(g.ffn) + ",\"vocab_size\":" + std::to_string(g.vocab) +
                    ",\"rms_norm_eps\":1e-6,\"max_position_embeddings\":512,\"tie_word_embeddings\":" +
                    (g.tied ? "true" : "false") + (g.bias ? ",\"attention_bias\":true" : "") +
                    (g.head_dim ? ",\"head_dim\":" + std::to_string(g.head_dim) : "") + "}";
  write_file_atomic(dir + "/config.json", cfg, true);
  const uint64_t H = uint64_t(g.hidden), q = uint64_t(g.heads * hd), kv = uint64_t(g.kv_heads * hd);
  std::vector<std::pair<std::string, std::vector<uint64_t>>> ts;
  ts.push_back({"model.embed_tokens.weight", {uint64_t(g.vocab), H}});
  ts.push_back({"model.norm.weight", {H}});
  if (!g.tied) ts.push_back({"lm_head.weight", {uint64_t(g.vocab), H}});
  for (int l = 0; l < g.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    ts.push_back({p + "input_layernorm.weight", {H}});
    ts.push_back({p + "self_attn.q_proj.weight", {q, H}});
    ts.push_back({p + "self_attn.k_proj.weight", {kv, H}});
    ts.push_back({p + "self_attn.v_proj.weight", {kv, H}});
    if (g.bias || g.arch == "qwen2") {
      ts.push_back({p + "self_attn.q_proj.bias", {q}});
      ts.push_back({p + "self_attn.k_proj.bias", {kv}});
      ts.push_back({p + "self_attn.v_proj.bias", {kv}});
    }
    if (g.arch == "qwen3") {
      ts.push_back({p + "self_attn.q_norm.weight", {uint64_t(hd)}});
      ts.push_back({p + "self_attn.k_norm.weight", {uint64_t(hd)}});
    }
    ts.push_back({p + "self_attn.o_proj.weight", {H, q}});
    ts.push_back({p + "post_attention_layernorm.weight", {H}});
    ts.push_back({p + "mlp.gate_proj.weight", {uint64_t(g.ffn), H}});
    ts.push_back({p + "mlp.up_proj.weight", {uint64_t(g.ffn), H}});
    ts.push_back({p + "mlp.down_proj.weight", {H, uint64_t(g.ffn)}});
  }
  std::vector<safetensors::OutTensor> out;
  for (size_t t = 0; t < ts.size(); ++t) {
    uint64_t n = 1;
    for (uint64_t d : ts[t].second) n *= d;
    out.push_back({ts[t].first, safetensors::Dtype::f32, ts[t].second, [t, n](ByteSink& s) {
                     for (uint64_t i = 0; i < n; ++i) {
                       const float v = float(std::sin(double(t * 131 + i) * 0.37) * 0.1);
                       s.write(&v, 4);
                     }
                   }});
  }
  safetensors::write_file(dir + "/model.safetensors", out, {}, true);
  return dir;
}

std::string imported_sha256(const Geometry& g, gguf::TensorType type, const std::string& tag) {
  const std::string dir = write_checkpoint(g, tag);
  ImportOptions o;
  o.type = type;
  o.tokenizer = false;
  import_checkpoint(dir, dir + "/out.gguf", o, true);
  return sha256_hex(read_file(dir + "/out.gguf", size_t(64) << 20));
}

TEST(ImportPins, EveryArchitectureKeepsItsBytes) {
  Geometry llama{"llama"}, llama_bias{"llama"}, qwen2{"qwen2"}, qwen3{"qwen3"};
  llama_bias.bias = true, llama_bias.tied = true;
  qwen2.tied = true;
  qwen3.head_dim = 16;
  EXPECT_EQ(imported_sha256(llama, gguf::TensorType::F32, "llama"),
            "68947c4b6b70e4686f06d66dcdbfe897f76bce525f51c1f0b1825658b4bfb528");
  EXPECT_EQ(imported_sha256(llama_bias, gguf::TensorType::F16, "llama-bias"),
            "81163e0a583a4d392dc2b7d55b19e4847d1460aace11cbc92da8f01f63ce4c74");
  EXPECT_EQ(imported_sha256(qwen2, gguf::TensorType::F32, "qwen2"),
            "33fe1f23caf8bed49d625c1bf74c3661c2911f26019203c43e19bf77826d12f2");
  EXPECT_EQ(imported_sha256(qwen3, gguf::TensorType::BF16, "qwen3"),
            "038fb96a34a767489c8326a74f1d487dc4911598f7a1fe83d4817e52628cd23e");
}

}  // namespace
}  // namespace ember::hf
