#include "model/config.h"

#include <cmath>
#include <string>

#include "util/error.h"

namespace ember::model {

namespace {

// Reads a positive integer `key` that must fit an int.
int positive_int(const gguf::GgufFile& f, const std::string& key) {
  const int64_t v = f.get_int(key);
  if (v <= 0 || v > (int64_t(1) << 30))
    fail_field(f.path(), key, "a positive integer below 2^30", std::to_string(v));
  return int(v);
}

int positive_int_or(const gguf::GgufFile& f, const std::string& key, int fallback) {
  return f.has(key) ? positive_int(f, key) : fallback;
}

// Checks that tensor `name` exists with GGML shape {cols, rows} (rows omitted: 1-D).
void expect_shape(const gguf::GgufFile& f, const std::string& name, uint64_t cols,
                  uint64_t rows) {
  const gguf::TensorInfo& t = f.tensor(name);
  std::vector<uint64_t> want = rows ? std::vector<uint64_t>{cols, rows}
                                    : std::vector<uint64_t>{cols};
  if (t.shape != want) {
    auto show = [](const std::vector<uint64_t>& s) {
      std::string out = "[";
      for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
      return out + "]";
    };
    fail_field(f.path(), "tensor " + name + " shape", show(want), show(t.shape));
  }
}

using gguf::Key;
using gguf::Tensor;
using gguf::tensor_name;

}  // namespace

const char* ffn_activation_name(FfnActivation a) { return a == FfnActivation::gelu ? "gelu" : "swiglu"; }
const char* norm_kind_name(NormKind n) { return n == NormKind::layernorm ? "layernorm" : "rmsnorm"; }

ModelConfig ModelConfig::from_gguf(const gguf::GgufFile& f) {
  ModelConfig c;
  const std::string arch = f.get_string("general.architecture");
  const gguf::ArchInfo& info = gguf::require_arch(arch, f.path(), "general.architecture");
  c.arch = info.arch;
  auto key = [&](Key k) { return gguf::key(arch, k); };

  c.n_layers = positive_int(f, key(Key::block_count));
  c.n_embd = positive_int(f, key(Key::embedding_length));
  c.n_ff = positive_int(f, key(Key::feed_forward_length));
  c.n_heads = positive_int(f, key(Key::head_count));
  c.n_kv_heads = positive_int_or(f, key(Key::head_count_kv), c.n_heads);
  c.n_ctx = positive_int_or(f, key(Key::context_length), int(info.context));
  if (c.n_heads % c.n_kv_heads != 0)
    fail_field(f.path(), key(Key::head_count_kv),
               "a divisor of head_count " + std::to_string(c.n_heads),
               std::to_string(c.n_kv_heads));
  if (f.has(key(Key::key_length))) {
    c.head_dim = positive_int(f, key(Key::key_length));
  } else {
    if (c.n_embd % c.n_heads != 0)
      fail_field(f.path(), key(Key::embedding_length),
                 "a multiple of head_count " + std::to_string(c.n_heads) +
                     " (or an explicit attention.key_length)",
                 std::to_string(c.n_embd));
    c.head_dim = c.n_embd / c.n_heads;
  }
  if (c.head_dim % 2 != 0)
    fail_field(f.path(), "head dim", "an even number (RoPE rotates pairs)",
               std::to_string(c.head_dim));
  if (f.has(key(Key::value_length)) &&
      positive_int(f, key(Key::value_length)) != c.head_dim)
    fail_field(f.path(), key(Key::value_length),
               "equal to the key length " + std::to_string(c.head_dim),
               std::to_string(f.get_int(key(Key::value_length))));
  if (f.has(key(Key::rope_dimension_count)) &&
      positive_int(f, key(Key::rope_dimension_count)) != c.head_dim)
    fail_field(f.path(), key(Key::rope_dimension_count),
               "the head dim " + std::to_string(c.head_dim) + " (partial RoPE is unsupported)",
               std::to_string(f.get_int(key(Key::rope_dimension_count))));

  const double eps = f.get_float_or(key(Key::rms_eps), info.rms_eps);
  if (!(eps > 0 && eps < 1))
    fail_field(f.path(), key(Key::rms_eps), "in (0, 1)",
               std::to_string(eps));
  c.rms_eps = float(eps);

  const std::string act = f.get_string_or("ember.toy.ffn_activation", "swiglu");
  const std::string norm = f.get_string_or("ember.toy.norm", "rmsnorm");
  if (act != "swiglu" && act != "gelu")
    fail_field(f.path(), "ember.toy.ffn_activation", "swiglu or gelu", "'" + act + "'");
  if (norm != "rmsnorm" && norm != "layernorm")
    fail_field(f.path(), "ember.toy.norm", "rmsnorm or layernorm", "'" + norm + "'");
  if ((act != "swiglu" || norm != "rmsnorm") && !info.toy_models)
    fail_field(f.path(), "ember.toy.*",
               "only in " + gguf::arch_names(", ", " or ", [](const gguf::ArchInfo& a) { return a.toy_models; }) +
                   " files (the study's toy models)",
               "arch " + arch);
  c.ffn_activation = act == "gelu" ? FfnActivation::gelu : FfnActivation::swiglu;
  c.norm = norm == "layernorm" ? NormKind::layernorm : NormKind::rmsnorm;

  c.rope_layout = info.rope_layout;
  const double theta = f.get_float_or(key(Key::rope_freq_base), info.rope_theta);
  if (!(theta > 1 && std::isfinite(theta)))
    fail_field(f.path(), key(Key::rope_freq_base), "a finite number > 1", std::to_string(theta));
  c.rope_theta = float(theta);

  // RoPE scaling: GGUF `rope.scaling.type` (none | linear | llama3), or a `rope_freqs.weight`
  // tensor of per-pair frequency divisors (what llama.cpp's converter writes for Llama 3.x).
  RopeScaling& s = c.rope_scaling;
  s.type = f.get_string_or(key(Key::rope_scaling_type), "none");
  if (s.type != "none" && s.type != "linear" && s.type != "llama3")
    fail_field(f.path(), key(Key::rope_scaling_type), "none, linear or llama3",
               "'" + s.type + "' (unsupported)");
  if (s.type != "none") {
    const double factor = f.get_float_or(key(Key::rope_scaling_factor), 1.0);
    if (!(factor >= 1 && std::isfinite(factor)))
      fail_field(f.path(), key(Key::rope_scaling_factor), "a finite number >= 1",
                 std::to_string(factor));
    s.factor = float(factor);
  }
  if (s.type == "llama3") {
    s.original_context = positive_int(f, key(Key::rope_scaling_original_context));
    s.low_freq_factor = float(f.get_float_or(key(Key::rope_scaling_low_freq), 1.0));
    s.high_freq_factor = float(f.get_float_or(key(Key::rope_scaling_high_freq), 4.0));
    if (!(s.high_freq_factor > s.low_freq_factor && s.low_freq_factor > 0))
      fail_field(f.path(), key(Key::rope_scaling_high_freq),
                 "greater than low_freq_factor > 0", std::to_string(s.high_freq_factor));
  }
  if (const gguf::TensorInfo* rf = f.find_tensor(tensor_name(Tensor::rope_freqs))) {
    if (rf->type != gguf::TensorType::F32)
      fail_field(f.path(), "tensor rope_freqs.weight type", "f32",
                 gguf::type_name(uint32_t(rf->type)));
    expect_shape(f, rf->name, uint64_t(c.head_dim / 2), 0);
    const float* d = reinterpret_cast<const float*>(rf->data);
    s.freq_factors.assign(d, d + c.head_dim / 2);
    for (float v : s.freq_factors)
      if (!(v > 0 && std::isfinite(v)))
        fail_field(f.path(), "tensor rope_freqs.weight", "finite positive factors",
                   std::to_string(v));
    if (s.type == "none") s.type = "llama3";
  }

  // Features from the tensors present; shapes checked against the hyper-parameters.
  const gguf::TensorInfo& embd = f.tensor(tensor_name(Tensor::token_embd));
  if (embd.shape.size() != 2 || embd.shape[0] != uint64_t(c.n_embd) || embd.shape[1] == 0 ||
      embd.shape[1] > (uint64_t(1) << 24))
    fail_field(f.path(), "tensor token_embd.weight shape",
               "[" + std::to_string(c.n_embd) + ", n_vocab]", "a different shape");
  c.n_vocab = int(embd.shape[1]);
  if (f.has(key(Key::vocab_size)) && f.get_int(key(Key::vocab_size)) != c.n_vocab)
    fail_field(f.path(), key(Key::vocab_size), std::to_string(c.n_vocab) + " (token_embd rows)",
               std::to_string(f.get_int(key(Key::vocab_size))));
  c.tied_output = f.find_tensor(tensor_name(Tensor::output)) == nullptr;
  if (!c.tied_output) expect_shape(f, tensor_name(Tensor::output), uint64_t(c.n_embd), uint64_t(c.n_vocab));
  expect_shape(f, tensor_name(Tensor::output_norm), uint64_t(c.n_embd), 0);

  c.qkv_bias = f.find_tensor(tensor_name(Tensor::attn_q, 0, "bias")) != nullptr;
  c.qk_norm = f.find_tensor(tensor_name(Tensor::attn_q_norm, 0)) != nullptr;
  const uint64_t q_dim = uint64_t(c.n_heads) * c.head_dim;
  const uint64_t kv_dim = uint64_t(c.n_kv_heads) * c.head_dim;
  for (int l = 0; l < c.n_layers; ++l) {
    expect_shape(f, tensor_name(Tensor::attn_norm, l), c.n_embd, 0);
    expect_shape(f, tensor_name(Tensor::attn_q, l), c.n_embd, q_dim);
    expect_shape(f, tensor_name(Tensor::attn_k, l), c.n_embd, kv_dim);
    expect_shape(f, tensor_name(Tensor::attn_v, l), c.n_embd, kv_dim);
    expect_shape(f, tensor_name(Tensor::attn_output, l), q_dim, c.n_embd);
    expect_shape(f, tensor_name(Tensor::ffn_norm, l), c.n_embd, 0);
    if (c.ffn_activation == FfnActivation::swiglu)
      expect_shape(f, tensor_name(Tensor::ffn_gate, l), c.n_embd, c.n_ff);
    else if (f.find_tensor(tensor_name(Tensor::ffn_gate, l)))
      fail_field(f.path(), "tensor " + tensor_name(Tensor::ffn_gate, l), "absent (a GELU MLP has no gate)", "present");
    expect_shape(f, tensor_name(Tensor::ffn_up, l), c.n_embd, c.n_ff);
    expect_shape(f, tensor_name(Tensor::ffn_down, l), c.n_ff, c.n_embd);
    if (c.qkv_bias) {
      expect_shape(f, tensor_name(Tensor::attn_q, l, "bias"), q_dim, 0);
      expect_shape(f, tensor_name(Tensor::attn_k, l, "bias"), kv_dim, 0);
      expect_shape(f, tensor_name(Tensor::attn_v, l, "bias"), kv_dim, 0);
    } else if (f.find_tensor(tensor_name(Tensor::attn_q, l, "bias"))) {
      fail_field(f.path(), "tensor " + tensor_name(Tensor::attn_q, l, "bias"), "absent (layer 0 has no bias)",
                 "present");
    }
    if (c.qk_norm) {
      expect_shape(f, tensor_name(Tensor::attn_q_norm, l), c.head_dim, 0);
      expect_shape(f, tensor_name(Tensor::attn_k_norm, l), c.head_dim, 0);
    }
  }
  if (info.qk_norm == gguf::Feature::required && !c.qk_norm)
    fail_field(f.path(), "tensor " + tensor_name(Tensor::attn_q_norm, 0), "present (" + arch + ")", "absent");
  return c;
}

}  // namespace ember::model
