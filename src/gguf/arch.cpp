#include "gguf/arch.h"

#include "gguf/writer.h"
#include "util/error.h"

namespace ember::gguf {
namespace {

using enum Feature;

// One row per architecture, in the order of Arch. Theta: the released models' values (Llama
// 1/2 10000; Qwen2/2.5/3 1e6) assumed when rope.freq_base is absent. synth_rms_eps: Llama
// 1e-5, Qwen 1e-6 (their config.json rms_norm_eps).
const std::vector<ArchInfo> kArchs = {
    //  arch         name     hf_class             rope layout          theta  eps   ctx
    {Arch::llama, "llama", "LlamaForCausalLM", RopeLayout::normal, 10000.0, 1e-5, 2048,
     /*synth_rms_eps=*/1e-5, /*qkv_bias=*/optional, /*qk_norm=*/forbidden,
     /*head_dim_keys=*/false, /*vocab_and_rope_dims=*/true, /*rope_freqs=*/true,
     /*toy_models=*/true},
    {Arch::qwen2, "qwen2", "Qwen2ForCausalLM", RopeLayout::neox, 1e6, 1e-5, 2048,
     /*synth_rms_eps=*/1e-6, /*qkv_bias=*/required, /*qk_norm=*/forbidden,
     /*head_dim_keys=*/false, /*vocab_and_rope_dims=*/false, /*rope_freqs=*/false,
     /*toy_models=*/false},
    {Arch::qwen3, "qwen3", "Qwen3ForCausalLM", RopeLayout::neox, 1e6, 1e-5, 2048,
     /*synth_rms_eps=*/1e-6, /*qkv_bias=*/forbidden, /*qk_norm=*/required,
     /*head_dim_keys=*/true, /*vocab_and_rope_dims=*/false, /*rope_freqs=*/false,
     /*toy_models=*/false},
};

struct KeyName {
  Key key;
  const char* suffix;
};
const KeyName kKeys[] = {
    {Key::context_length, "context_length"},
    {Key::embedding_length, "embedding_length"},
    {Key::block_count, "block_count"},
    {Key::feed_forward_length, "feed_forward_length"},
    {Key::vocab_size, "vocab_size"},
    {Key::head_count, "attention.head_count"},
    {Key::head_count_kv, "attention.head_count_kv"},
    {Key::key_length, "attention.key_length"},
    {Key::value_length, "attention.value_length"},
    {Key::rms_eps, "attention.layer_norm_rms_epsilon"},
    {Key::rope_dimension_count, "rope.dimension_count"},
    {Key::rope_freq_base, "rope.freq_base"},
    {Key::rope_scaling_type, "rope.scaling.type"},
    {Key::rope_scaling_factor, "rope.scaling.factor"},
    {Key::rope_scaling_original_context, "rope.scaling.original_context_length"},
    {Key::rope_scaling_low_freq, "rope.scaling.low_freq_factor"},
    {Key::rope_scaling_high_freq, "rope.scaling.high_freq_factor"},
};

struct TensorNames {
  Tensor tensor;
  bool per_block;
  const char* gguf;  // after "blk.N." for a block tensor
  const char* hf;    // after "model.layers.N." for a block tensor
};
const TensorNames kTensors[] = {
    {Tensor::token_embd, false, "token_embd", "model.embed_tokens"},
    {Tensor::rope_freqs, false, "rope_freqs", ""},  // computed by the converter, not in HF
    {Tensor::output_norm, false, "output_norm", "model.norm"},
    {Tensor::output, false, "output", "lm_head"},
    {Tensor::attn_norm, true, "attn_norm", "input_layernorm"},
    {Tensor::attn_q, true, "attn_q", "self_attn.q_proj"},
    {Tensor::attn_k, true, "attn_k", "self_attn.k_proj"},
    {Tensor::attn_v, true, "attn_v", "self_attn.v_proj"},
    {Tensor::attn_q_norm, true, "attn_q_norm", "self_attn.q_norm"},
    {Tensor::attn_k_norm, true, "attn_k_norm", "self_attn.k_norm"},
    {Tensor::attn_output, true, "attn_output", "self_attn.o_proj"},
    {Tensor::ffn_norm, true, "ffn_norm", "post_attention_layernorm"},
    {Tensor::ffn_gate, true, "ffn_gate", "mlp.gate_proj"},
    {Tensor::ffn_up, true, "ffn_up", "mlp.up_proj"},
    {Tensor::ffn_down, true, "ffn_down", "mlp.down_proj"},
};

const TensorNames& names_of(Tensor t, int layer) {
  const TensorNames& n = kTensors[size_t(t)];
  EMBER_CHECK(n.tensor == t && n.per_block == (layer >= 0));
  return n;
}

std::string join(const char* block_prefix, const TensorNames& n, const char* base, int layer,
                 std::string_view suffix) {
  std::string s = n.per_block ? block_prefix + std::to_string(layer) + "." : std::string();
  return s.append(base).append(".").append(suffix);
}

}  // namespace

const std::vector<ArchInfo>& archs() { return kArchs; }

const ArchInfo& arch_info(Arch a) {
  const ArchInfo& i = kArchs.at(size_t(a));
  EMBER_CHECK(i.arch == a);
  return i;
}

const ArchInfo* find_arch(std::string_view name) {
  for (const ArchInfo& a : kArchs)
    if (name == a.name) return &a;
  return nullptr;
}

const ArchInfo& require_arch(std::string_view name, const std::string& where,
                             const std::string& field) {
  const ArchInfo* a = find_arch(name);
  if (!a) fail_field(where, field, arch_names(", ", " or "), "'" + std::string(name) + "'");
  return *a;
}

const char* arch_name(Arch a) { return arch_info(a).name; }

Arch parse_arch(const std::string& name) {
  return require_arch(name, "architecture", "name").arch;
}

const char* rope_layout_name(RopeLayout l) {
  return l == RopeLayout::normal ? "normal" : "neox";
}

std::string arch_names(std::string_view sep, std::string_view last_sep,
                       bool (*pred)(const ArchInfo&)) {
  std::vector<const char*> names;
  for (const ArchInfo& a : kArchs)
    if (!pred || pred(a)) names.push_back(a.name);
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) out += i + 1 == names.size() && !last_sep.empty() ? last_sep : sep;
    out += names[i];
  }
  return out;
}

std::string key(std::string_view arch, Key k) {
  const KeyName& n = kKeys[size_t(k)];
  EMBER_CHECK(n.key == k);
  return std::string(arch).append(".").append(n.suffix);
}

std::string tensor_name(Tensor t, int layer, std::string_view suffix) {
  const TensorNames& n = names_of(t, layer);
  return join("blk.", n, n.gguf, layer, suffix);
}

std::string hf_tensor_name(Tensor t, int layer, std::string_view suffix) {
  const TensorNames& n = names_of(t, layer);
  EMBER_CHECK(*n.hf != '\0');
  return join("model.layers.", n, n.hf, layer, suffix);
}

void write_arch_metadata(GgufWriter& w, const ArchHparams& h) {
  const ArchInfo& info = require_arch(h.arch, "GGUF writer", "architecture");
  const std::string& a = h.arch;
  w.set_string("general.architecture", a);
  w.set_string("general.type", "model");
  w.set_string("general.name", h.name);
  w.set_u32(key(a, Key::block_count), uint32_t(h.layers));
  w.set_u32(key(a, Key::context_length), uint32_t(h.context));
  w.set_u32(key(a, Key::embedding_length), uint32_t(h.hidden));
  w.set_u32(key(a, Key::feed_forward_length), uint32_t(h.ffn));
  w.set_u32(key(a, Key::head_count), uint32_t(h.heads));
  w.set_u32(key(a, Key::head_count_kv), uint32_t(h.kv_heads));
  w.set_f32(key(a, Key::rope_freq_base), float(h.rope_theta));
  w.set_f32(key(a, Key::rms_eps), float(h.rms_eps));
  // A reader derives head_dim = hidden / heads when these are absent.
  if (info.head_dim_keys || h.head_dim * h.heads != h.hidden) {
    w.set_u32(key(a, Key::key_length), uint32_t(h.head_dim));
    w.set_u32(key(a, Key::value_length), uint32_t(h.head_dim));
  }
  if (info.vocab_and_rope_dims) {
    w.set_u32(key(a, Key::vocab_size), uint32_t(h.vocab));
    w.set_u32(key(a, Key::rope_dimension_count), uint32_t(h.head_dim));
  }
}

}  // namespace ember::gguf
