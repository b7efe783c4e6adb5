#pragma once
// Tiny random models written with GgufWriter into memory, for engine tests that cover every
// architecture feature (GQA ratios, biases, Q/K norm, NEOX vs normal RoPE, tied output,
// explicit head dim, RoPE scaling) and weight type without files on disk.
#include <cstdint>
#include <memory>
#include <string>

#include "gguf/gguf_file.h"
#include "model/engine.h"

namespace ember::test {

struct TinySpec {
  std::string arch = "llama";  // llama | qwen2 | qwen3
  int layers = 2;
  int embd = 256;
  int heads = 4;
  int kv_heads = 2;
  int head_dim = 0;  // 0: embd / heads; otherwise written as attention.key_length
  int ff = 512;
  int vocab = 96;
  bool bias = false;     // Q/K/V biases
  bool qk_norm = false;  // attn_q_norm / attn_k_norm
  bool tied = false;     // no output.weight
  gguf::TensorType wtype = gguf::TensorType::F32;  // the 2-D weights (token_embd included)
  std::string rope_scaling = "none";  // none | linear | llama3
  float theta = 0.0f;  // 0: arch default
  uint64_t seed = 1;
  std::string name() const;  // a short label for test output
};

// The GGUF image of a random model with this spec, parsed.
gguf::GgufFile make_tiny_gguf(const TinySpec& spec);
std::shared_ptr<const model::Model> make_tiny_model(const TinySpec& spec);

}  // namespace ember::test
