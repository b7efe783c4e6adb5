#pragma once
// Hyper-parameters of a supported architecture, read from GGUF metadata and checked.
#include <cstdint>
#include <string>
#include <vector>

#include "gguf/arch.h"
#include "gguf/gguf_file.h"

namespace ember::model {

// The architectures and their RoPE layouts are the table's (gguf/arch.h), under the names the
// engine has always used: model::Arch::qwen2, model::arch_name(), model::RopeLayout::neox.
using gguf::Arch;
using gguf::arch_name;
using gguf::parse_arch;
using gguf::RopeLayout;
using gguf::rope_layout_name;

struct RopeScaling {
  std::string type = "none";     // none | linear | llama3
  float factor = 1.0f;
  int original_context = 0;      // llama3: original_max_position_embeddings
  float low_freq_factor = 1.0f;  // llama3
  float high_freq_factor = 4.0f; // llama3
  // [head_dim / 2] per-pair frequency divisors from a `rope_freqs.weight` tensor (what
  // llama.cpp's converter writes for Llama 3.x); empty when the file has none, in which case
  // llama3 divisors are computed from the fields above (model/rope.h).
  std::vector<float> freq_factors;
};

// The block's MLP and norms. swiglu + rmsnorm is every real model ember runs; gelu (an
// ungated up -> GELU -> down MLP, no ffn_gate tensor) and layernorm (mean-centred, no bias) exist
// only for the toy models of `study recompute-anchor` (seed 001's configuration), marked in the
// GGUF by ember's own keys `ember.toy.ffn_activation` / `ember.toy.norm` (llama files only).
enum class FfnActivation { swiglu, gelu };
enum class NormKind { rmsnorm, layernorm };
const char* ffn_activation_name(FfnActivation a);
const char* norm_kind_name(NormKind n);

struct ModelConfig {
  Arch arch = Arch::llama;
  int n_layers = 0;
  int n_embd = 0;      // hidden size
  int n_heads = 0;     // query heads
  int n_kv_heads = 0;  // key/value heads (GQA when < n_heads)
  int head_dim = 0;    // per head; n_embd / n_heads unless the file says otherwise (qwen3)
  int n_ff = 0;        // MLP inner size
  int n_vocab = 0;
  int n_ctx = 0;       // trained context length from metadata
  float rope_theta = 10000.0f;  // from_gguf: the file's, else gguf::ArchInfo::rope_theta
  RopeLayout rope_layout = RopeLayout::normal;
  RopeScaling rope_scaling;
  float rms_eps = 1e-5f;
  bool qkv_bias = false;     // qwen2
  bool qk_norm = false;      // qwen3: per-head RMSNorm of Q and K before RoPE
  bool tied_output = false;  // no output.weight: the LM head is token_embd
  FfnActivation ffn_activation = FfnActivation::swiglu;
  NormKind norm = NormKind::rmsnorm;  // attention, MLP and output norms (Q/K norm stays RMS)

  // Reads `<arch>.*` keys and the tensor table; Error naming the file and the key/tensor on
  // anything missing or inconsistent. An absent optional key takes the table's default
  // (gguf::ArchInfo: rope_theta, rms_eps, context), the same value `model inspect` reports.
  static ModelConfig from_gguf(const gguf::GgufFile& file);
};

}  // namespace ember::model
