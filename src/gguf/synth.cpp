#include "gguf/synth.h"

#include <cmath>
#include <functional>

#include "gguf/arch.h"
#include "gguf/convert.h"
#include "gguf/random.h"
#include "gguf/synth_vocab.h"
#include "util/error.h"

namespace ember::gguf {
namespace {

constexpr const char* kWhere = "synth";

// How a tensor's values are drawn (docs/formats/gguf.md lists the scales and why).
enum class Init {
  normal,      // N(0, std^2): projections (std 1/sqrt(fan_in)), embeddings (2/sqrt(hidden))
  norm,        // 1 + N(0, 0.05^2): RMSNorm weights, near 1
  bias,        // N(0, 0.05^2): small Q/K/V biases
  rope_freqs,  // llama3 frequency factors, computed (not random)
};

struct Planned {
  std::string name;
  std::vector<uint64_t> shape;
  Init init;
  double std = 0;
};

void fill_row(const SynthSpec& s, const Planned& t, uint64_t row, float* out) {
  const int64_t n = int64_t(t.shape[0]);
  if (t.init == Init::rope_freqs) {
    // convert_hf_to_gguf.py (LlamaModel, rope_type llama3): one factor per rotated pair.
    const double dim = double(s.head_dim);
    const double low_wavelen = double(s.rope_original_context) / s.rope_low_freq;
    const double high_wavelen = double(s.rope_original_context) / s.rope_high_freq;
    for (int64_t i = 0; i < n; ++i) {
      const double freq = 1.0 / std::pow(s.rope_theta, double(2 * i) / dim);
      const double wavelen = 2.0 * M_PI / freq;
      double f;
      if (wavelen < high_wavelen) {
        f = 1.0;
      } else if (wavelen > low_wavelen) {
        f = s.rope_factor;
      } else {
        const double smooth = (double(s.rope_original_context) / wavelen - s.rope_low_freq) /
                              (s.rope_high_freq - s.rope_low_freq);
        f = 1.0 / ((1.0 - smooth) / s.rope_factor + smooth);
      }
      out[i] = float(f);
    }
    return;
  }
  SplitMix64 rng(derive_seed(s.seed, t.name, row));
  for (int64_t i = 0; i < n; ++i) {
    const double z = rng.normal();
    switch (t.init) {
      case Init::normal: out[i] = float(t.std * z); break;
      case Init::norm: out[i] = float(1.0 + 0.05 * z); break;
      case Init::bias: out[i] = float(0.05 * z); break;
      case Init::rope_freqs: break;
    }
  }
}

std::vector<Planned> plan_tensors(const SynthSpec& s) {
  const uint64_t h = uint64_t(s.hidden), hd = uint64_t(s.head_dim);
  const uint64_t q_dim = uint64_t(s.heads) * hd, kv_dim = uint64_t(s.kv_heads) * hd;
  const uint64_t ffn = uint64_t(s.ffn), vocab = uint64_t(s.vocab);
  auto proj = [](uint64_t fan_in) { return 1.0 / std::sqrt(double(fan_in)); };
  const double emb_std = 2.0 / std::sqrt(double(h));
  std::vector<Planned> p;
  // Shapes in GGML order: shape[0] is the row length (the input dimension of a projection).
  auto name = [](Tensor t, int64_t layer = -1, const char* suffix = "weight") {
    return tensor_name(t, int(layer), suffix);
  };
  p.push_back({name(Tensor::token_embd), {h, vocab}, Init::normal, emb_std});
  if (s.rope_llama3) p.push_back({name(Tensor::rope_freqs), {hd / 2}, Init::rope_freqs});
  for (int64_t i = 0; i < s.layers; ++i) {
    p.push_back({name(Tensor::attn_norm, i), {h}, Init::norm});
    p.push_back({name(Tensor::attn_q, i), {h, q_dim}, Init::normal, proj(h)});
    if (s.qkv_bias) p.push_back({name(Tensor::attn_q, i, "bias"), {q_dim}, Init::bias});
    p.push_back({name(Tensor::attn_k, i), {h, kv_dim}, Init::normal, proj(h)});
    if (s.qkv_bias) p.push_back({name(Tensor::attn_k, i, "bias"), {kv_dim}, Init::bias});
    p.push_back({name(Tensor::attn_v, i), {h, kv_dim}, Init::normal, proj(h)});
    if (s.qkv_bias) p.push_back({name(Tensor::attn_v, i, "bias"), {kv_dim}, Init::bias});
    if (s.qk_norm) {
      p.push_back({name(Tensor::attn_q_norm, i), {hd}, Init::norm});
      p.push_back({name(Tensor::attn_k_norm, i), {hd}, Init::norm});
    }
    p.push_back({name(Tensor::attn_output, i), {q_dim, h}, Init::normal, proj(q_dim)});
    p.push_back({name(Tensor::ffn_norm, i), {h}, Init::norm});
    if (s.ffn_activation != "gelu") p.push_back({name(Tensor::ffn_gate, i), {h, ffn}, Init::normal, proj(h)});
    p.push_back({name(Tensor::ffn_up, i), {h, ffn}, Init::normal, proj(h)});
    p.push_back({name(Tensor::ffn_down, i), {ffn, h}, Init::normal, proj(ffn)});
  }
  p.push_back({name(Tensor::output_norm), {h}, Init::norm});
  if (!s.tied) p.push_back({name(Tensor::output), {h, vocab}, Init::normal, emb_std});
  return p;
}

// A feature flag against the architecture's row: set when required, unset when forbidden.
void require_feature(const ArchInfo& info, Feature feature, bool set, const char* flag, const char* why,
                     bool (*allowed)(const ArchInfo&)) {
  if (feature == Feature::required && !set)
    fail_field(kWhere, flag, std::string("set for arch ") + info.name + " (" + why + ")", "not set");
  if (feature == Feature::forbidden && set)
    fail_field(kWhere, flag, "only with arch " + arch_names(", ", " or ", allowed), std::string("arch ") + info.name);
}

void require_positive(int64_t v, const char* flag, int64_t max) {
  if (v < 1 || v > max)
    fail_field(kWhere, flag, "1.." + std::to_string(max), std::to_string(v));
}

}  // namespace

std::vector<std::string> synth_preset_names() {
  return {"qwen2.5-0.5b", "qwen2.5-1.5b", "llama-3.2-1b", "qwen3-0.6b"};
}

SynthSpec synth_preset(const std::string& name) {
  SynthSpec s;
  s.name = name;
  if (name == "qwen2.5-0.5b") {  // Qwen/Qwen2.5-0.5B config.json
    s.arch = "qwen2";
    s.layers = 24, s.hidden = 896, s.heads = 14, s.kv_heads = 2, s.ffn = 4864;
    s.vocab = 151936, s.context = 32768, s.rope_theta = 1e6, s.rms_eps = 1e-6;
    s.qkv_bias = true, s.tied = true;
  } else if (name == "qwen2.5-1.5b") {  // Qwen/Qwen2.5-1.5B
    s.arch = "qwen2";
    s.layers = 28, s.hidden = 1536, s.heads = 12, s.kv_heads = 2, s.ffn = 8960;
    s.vocab = 151936, s.context = 32768, s.rope_theta = 1e6, s.rms_eps = 1e-6;
    s.qkv_bias = true, s.tied = true;
  } else if (name == "llama-3.2-1b") {  // meta-llama/Llama-3.2-1B
    s.arch = "llama";
    s.layers = 16, s.hidden = 2048, s.heads = 32, s.kv_heads = 8, s.head_dim = 64;
    s.ffn = 8192, s.vocab = 128256, s.context = 131072, s.rope_theta = 500000;
    s.rms_eps = 1e-5, s.tied = true;
    s.rope_llama3 = true, s.rope_factor = 32, s.rope_low_freq = 1, s.rope_high_freq = 4;
    s.rope_original_context = 8192;
  } else if (name == "qwen3-0.6b") {  // Qwen/Qwen3-0.6B
    s.arch = "qwen3";
    s.layers = 28, s.hidden = 1024, s.heads = 16, s.kv_heads = 8, s.head_dim = 128;
    s.ffn = 3072, s.vocab = 151936, s.context = 40960, s.rope_theta = 1e6, s.rms_eps = 1e-6;
    s.qk_norm = true, s.tied = true;
  } else {
    fail_field(kWhere, "--preset", "qwen2.5-0.5b, qwen2.5-1.5b, llama-3.2-1b or qwen3-0.6b",
               "'" + name + "'");
  }
  return s;
}

SynthSpec resolve_synth_spec(SynthSpec s) {
  const ArchInfo& info = require_arch(s.arch, kWhere, "--arch");
  require_positive(s.layers, "--layers", 1024);
  require_positive(s.hidden, "--hidden", 65536);
  require_positive(s.heads, "--heads", 1024);
  require_positive(s.kv_heads, "--kv-heads", 1024);
  require_positive(s.ffn, "--ffn", 1 << 20);
  if (s.vocab < kSynthMinVocab)
    fail_field(kWhere, "--vocab",
               ">= " + std::to_string(kSynthMinVocab) + " (256 byte tokens + <|bos|> + <|eos|>)",
               std::to_string(s.vocab));
  require_positive(s.vocab, "--vocab", 1 << 24);
  if (s.heads % s.kv_heads != 0)
    fail_field(kWhere, "--kv-heads", "a divisor of --heads " + std::to_string(s.heads),
               std::to_string(s.kv_heads));
  if (s.head_dim == 0) {
    if (s.hidden % s.heads != 0)
      fail_field(kWhere, "--heads", "a divisor of --hidden " + std::to_string(s.hidden) +
                                        " (or pass --head-dim)",
                 std::to_string(s.heads));
    s.head_dim = s.hidden / s.heads;
  }
  require_positive(s.head_dim, "--head-dim", 4096);
  if (s.head_dim % 2 != 0)
    fail_field(kWhere, "--head-dim", "an even number (RoPE rotates pairs)",
               std::to_string(s.head_dim));
  require_feature(info, info.qkv_bias, s.qkv_bias, "--qkv-bias", "its Q/K/V projections have biases",
                  [](const ArchInfo& a) { return a.qkv_bias != Feature::forbidden; });
  require_feature(info, info.qk_norm, s.qk_norm, "--qk-norm", "it normalises Q and K per head",
                  [](const ArchInfo& a) { return a.qk_norm != Feature::forbidden; });
  if (s.rope_llama3 && !info.rope_freqs)
    fail_field(kWhere, "rope scaling llama3",
               "only with arch " + arch_names(", ", " or ", [](const ArchInfo& a) { return a.rope_freqs; }),
               "arch " + s.arch);
  if (s.rope_llama3 && (s.rope_original_context < 1 || s.rope_factor <= 0 ||
                        s.rope_high_freq <= s.rope_low_freq))
    fail_field(kWhere, "rope scaling llama3",
               "factor > 0, original context >= 1, high_freq_factor > low_freq_factor",
               "an inconsistent setting");
  if (s.ffn_activation != "swiglu" && s.ffn_activation != "gelu")
    fail_field(kWhere, "--activation", "swiglu or gelu", "'" + s.ffn_activation + "'");
  if (s.norm != "rmsnorm" && s.norm != "layernorm")
    fail_field(kWhere, "--norm", "rmsnorm or layernorm", "'" + s.norm + "'");
  if ((s.ffn_activation != "swiglu" || s.norm != "rmsnorm") && !info.toy_models)
    fail_field(kWhere, "--activation/--norm",
               "the defaults for arch " + s.arch + " (toy models are " +
                   arch_names(", ", " or ", [](const ArchInfo& a) { return a.toy_models; }) + ")",
               s.ffn_activation + "/" + s.norm);
  if (s.context == 0) s.context = 4096;
  require_positive(s.context, "--context", int64_t(1) << 24);
  if (s.rope_theta == 0) s.rope_theta = info.rope_theta;
  if (!(s.rope_theta > 1.0) || !std::isfinite(s.rope_theta))
    fail_field(kWhere, "--rope-theta", "a finite number > 1", std::to_string(s.rope_theta));
  if (s.rms_eps == 0) s.rms_eps = info.synth_rms_eps;
  if (!is_model_target_type(s.type))
    fail_field(kWhere, "--type", "f32, f16, q8_0, q4_0, q4_k or q6_k",
               type_name(uint32_t(s.type)));
  if (s.name.empty()) s.name = "ember-synth-" + s.arch + "-s" + std::to_string(s.seed);
  if (s.outliers.active()) plan_outliers(s);  // checks the geometry can hold it
  return s;
}

GgufWriter synth_model(const SynthSpec& spec_in, std::vector<SynthTensorNote>* fallbacks) {
  const SynthSpec s = resolve_synth_spec(spec_in);
  GgufWriter w;
  write_arch_metadata(w, {s.arch, s.name, s.layers, s.context, s.hidden, s.ffn, s.heads, s.kv_heads, s.head_dim,
                          s.vocab, s.rope_theta, s.rms_eps});
  if (s.rope_llama3) {
    // llama.cpp reads the factors from rope_freqs.weight and would misread standard
    // rope.scaling.* keys (it has no "llama3" type), so the parameters live under ember.*.
    w.set_string("ember.rope.scaling.type", "llama3");
    w.set_f32("ember.rope.scaling.factor", float(s.rope_factor));
    w.set_f32("ember.rope.scaling.low_freq_factor", float(s.rope_low_freq));
    w.set_f32("ember.rope.scaling.high_freq_factor", float(s.rope_high_freq));
    w.set_u32("ember.rope.scaling.original_context_length", uint32_t(s.rope_original_context));
  }
  w.set_u32("general.file_type", llama_file_type(s.type));
  if (traits(s.type).block_elems > 1) w.set_u32("general.quantization_version", 2);
  w.set_u64("ember.synth.seed", s.seed);
  if (s.outliers.active()) w.set_string("ember.synth.outliers", s.outliers.text());
  if (s.ffn_activation != "swiglu") w.set_string("ember.toy.ffn_activation", s.ffn_activation);
  if (s.norm != "rmsnorm") w.set_string("ember.toy.norm", s.norm);
  write_synth_tokenizer(w, s.vocab, s.pre_tokenizer);

  auto spec = std::make_shared<const SynthSpec>(s);
  auto plan = s.outliers.active() ? std::make_shared<const OutlierPlan>(plan_outliers(s)) : nullptr;
  for (Planned& t : plan_tensors(s)) {
    const TensorType to =
        converts_tensor(t.shape) ? storage_type(s.type, t.shape[0]) : TensorType::F32;
    if (fallbacks && converts_tensor(t.shape) && to != s.type) fallbacks->push_back({t.name, to});
    auto planned = std::make_shared<const Planned>(t);
    const std::vector<uint64_t> shape = t.shape;
    w.add_tensor(t.name, shape, to, [spec, plan, planned, to](ByteSink& out) {
      const int64_t n = int64_t(planned->shape[0]);
      const uint64_t rows = planned->shape.size() > 1 ? planned->shape[1] : 1;
      std::vector<float> row(static_cast<size_t>(n));
      std::vector<uint8_t> scratch;
      for (uint64_t r = 0; r < rows; ++r) {
        fill_row(*spec, *planned, r, row.data());
        if (plan) shape_outlier_row(*plan, planned->name, r, n, row.data());
        encode_row(to, row.data(), n, scratch, out);
      }
    });
  }
  return w;
}

}  // namespace ember::gguf
