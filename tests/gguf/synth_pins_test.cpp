// The bytes of `ember model synth` output, pinned for every architecture and every metadata
// branch (key_length/value_length, llama-only keys, llama3 RoPE, toy MLP/norm, quantized
// types, tied head). Recorded before the architecture table (gguf/arch.h) replaced the
// per-writer metadata code; a change here changes every synthetic model and its identity.
#include <gtest/gtest.h>

#include "gguf/synth.h"
#include "gguf_fixture.h"
#include "util/sha256.h"

namespace ember::gguf {
namespace {

SynthSpec pinned_spec(const std::string& arch) { return fixture::small_synth(arch, 7); }

struct Pin {
  const char* what;
  SynthSpec spec;
  const char* sha256;
};

std::vector<Pin> pins() {
  std::vector<Pin> p;
  p.push_back({"llama", pinned_spec("llama"),
             "a3be4699cf457d3fb038b49e206cc547a527e1c1974a32f484e4c44b403fdb4a"});
  p.push_back({"qwen2", pinned_spec("qwen2"),
             "5fdcc9207e4e52cd18e2bda3b7ae1666abee1671fe8572ca1b92a502ffde9339"});
  p.push_back({"qwen3", pinned_spec("qwen3"),
             "f26212d68955635ab7fceed13d285fff2ab178286fc70c5b5d0afa1a67a4cede"});
  SynthSpec s = pinned_spec("qwen3");
  s.head_dim = 32, s.tied = true, s.type = TensorType::Q8_0, s.pre_tokenizer = "bloom";
  p.push_back({"qwen3 head_dim 32 tied q8_0 bloom", s,
             "3c619ad3c4e76b5cc96f24e8db4fe82415b24ca00bddac6e1b4f9ef8ead4df83"});
  s = pinned_spec("qwen2");
  s.rope_theta = 250000, s.rms_eps = 3e-6, s.context = 1000, s.name = "named";
  p.push_back({"qwen2 explicit theta/eps/context/name", s,
             "0d7f7475f59f9e85a211906bc53a5db9b952abfaf0b10c0be4e5ff05f9845f54"});
  s = pinned_spec("llama");
  s.head_dim = 32, s.qkv_bias = true, s.type = TensorType::F16;
  p.push_back({"llama head_dim 32 qkv_bias f16", s,
             "794e6eb0f404e7e50c6aef641e8393a2dfe38a9cea60a562e8f3c91b0c2c4239"});
  s = pinned_spec("llama");
  s.rope_llama3 = true, s.rope_factor = 8, s.rope_original_context = 512, s.rope_theta = 500000;
  p.push_back({"llama llama3 rope", s,
             "150d362c7551f0235131bfa45f0f891b34234728c65087f2cc9708ec5f1a61a8"});
  s = pinned_spec("llama");
  s.ffn_activation = "gelu", s.norm = "layernorm", s.type = TensorType::Q4_0;
  p.push_back({"llama toy gelu layernorm q4_0", s,
             "5303c28b2ec258cd2528351ae550ea73ca0f65539f30f1091212c8270edf5e1c"});
  return p;
}

TEST(SynthPins, EveryArchitectureAndBranchKeepsItsBytes) {
  for (const Pin& p : pins()) {
    SCOPED_TRACE(p.what);
    const auto bytes = fixture::to_bytes(synth_model(p.spec));
    EXPECT_EQ(sha256_hex(bytes.data(), bytes.size()), p.sha256);
  }
}

}  // namespace
}  // namespace ember::gguf
