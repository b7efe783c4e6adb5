#include "gguf/summary.h"

#include <cstdio>
#include <deque>
#include <map>

#include "gguf/arch.h"
#include "gguf/identity.h"
#include "util/printable.h"

namespace ember::gguf {

ModelSummary summarize(const GgufFile& f) {
  ModelSummary s;
  s.file = f.path();
  s.gguf_version = f.version();
  s.file_size = f.file_size();
  s.alignment = f.alignment();
  s.architecture = f.get_string_or("general.architecture", "");
  s.name = f.get_string_or("general.name", "");
  // An architecture of the table gets the engine's defaults for absent keys (gguf/arch.h);
  // another is reported leniently: absent keys read as 0, theta as 10000 (llama.cpp's
  // default for any architecture), the layout as "unknown".
  const ArchInfo* info = find_arch(s.architecture);
  auto key = [&](Key k) { return gguf::key(s.architecture, k); };
  s.layers = f.get_int_or(key(Key::block_count), 0);
  s.hidden = f.get_int_or(key(Key::embedding_length), 0);
  s.heads = f.get_int_or(key(Key::head_count), 0);
  s.kv_heads = f.get_int_or(key(Key::head_count_kv), s.heads);
  s.head_dim = f.get_int_or(key(Key::key_length), s.heads ? s.hidden / s.heads : 0);
  s.ffn = f.get_int_or(key(Key::feed_forward_length), 0);
  s.context = f.get_int_or(key(Key::context_length), info ? info->context : 0);
  if (const TensorInfo* e = f.find_tensor(tensor_name(Tensor::token_embd)); e && e->shape.size() == 2) {
    s.vocab = int64_t(e->shape[1]);
  } else {
    s.vocab = f.get_int_or(key(Key::vocab_size), 0);
  }
  s.rope_theta = f.get_float_or(key(Key::rope_freq_base), info ? info->rope_theta : 10000.0);
  s.rope_dimensions = f.get_int_or(key(Key::rope_dimension_count), s.head_dim);
  s.rope_layout = info ? rope_layout_name(info->rope_layout) : "unknown";
  if (f.has(key(Key::rope_scaling_type))) {
    s.rope_scaling = f.get_string(key(Key::rope_scaling_type));
    s.rope_scaling_factor = f.get_float_or(key(Key::rope_scaling_factor), 1.0);
  } else if (f.has("ember.rope.scaling.type")) {
    s.rope_scaling = f.get_string("ember.rope.scaling.type");
    s.rope_scaling_factor = f.get_float_or("ember.rope.scaling.factor", 1.0);
  } else if (f.find_tensor(tensor_name(Tensor::rope_freqs))) {
    s.rope_scaling = "rope_freqs";
  } else {
    s.rope_scaling = "none";
  }
  s.rms_eps = f.get_float_or(key(Key::rms_eps), info ? info->rms_eps : 0.0);
  s.qkv_bias = f.find_tensor(tensor_name(Tensor::attn_q, 0, "bias")) != nullptr;
  s.qk_norm = f.find_tensor(tensor_name(Tensor::attn_q_norm, 0)) != nullptr;
  s.tied_output = f.find_tensor(tensor_name(Tensor::output)) == nullptr;
  s.tokenizer_model = f.get_string_or("tokenizer.ggml.model", "");
  s.tokenizer_pre = f.get_string_or("tokenizer.ggml.pre", "");
  if (const Value* t = f.find("tokenizer.ggml.tokens"); t && t->type == ValueType::ARRAY)
    s.tokenizer_size = int64_t(t->array.size());
  s.bos = f.get_int_or("tokenizer.ggml.bos_token_id", -1);
  s.eos = f.get_int_or("tokenizer.ggml.eos_token_id", -1);
  s.file_type = f.get_int_or("general.file_type", -1);
  s.synth_outliers = f.get_string_or("ember.synth.outliers", "");
  for (const TensorInfo& t : f.tensors()) {
    s.tensors.push_back({t.name, type_name(uint32_t(t.type)), t.shape, t.n_bytes});
    s.tensor_bytes += t.n_bytes;
  }
  s.identity = model_identity(f).hex();
  return s;
}

nlohmann::ordered_json summary_json(const ModelSummary& s) {
  nlohmann::ordered_json j;
  j["file"] = s.file;
  j["identity"] = s.identity;
  j["gguf_version"] = s.gguf_version;
  j["file_size"] = s.file_size;
  j["alignment"] = s.alignment;
  j["architecture"] = s.architecture;
  j["name"] = s.name;
  j["geometry"] = {{"layers", s.layers},     {"hidden", s.hidden}, {"heads", s.heads},
                   {"kv_heads", s.kv_heads}, {"head_dim", s.head_dim}, {"ffn", s.ffn},
                   {"vocab", s.vocab},       {"context", s.context}};
  j["rope"] = {{"theta", s.rope_theta},
               {"dimensions", s.rope_dimensions},
               {"layout", s.rope_layout},
               {"scaling", s.rope_scaling},
               {"scaling_factor", s.rope_scaling_factor}};
  j["rms_eps"] = s.rms_eps;
  j["qkv_bias"] = s.qkv_bias;
  j["qk_norm"] = s.qk_norm;
  j["tied_output"] = s.tied_output;
  j["tokenizer"] = {{"model", s.tokenizer_model},
                    {"pre", s.tokenizer_pre},
                    {"size", s.tokenizer_size},
                    {"bos", s.bos},
                    {"eos", s.eos}};
  j["file_type"] = s.file_type;
  if (!s.synth_outliers.empty()) j["synth_outliers"] = s.synth_outliers;  // only when present: older pins hold
  j["tensor_bytes"] = s.tensor_bytes;
  nlohmann::ordered_json ts = nlohmann::ordered_json::array();
  for (const auto& t : s.tensors)
    ts.push_back({{"name", t.name}, {"type", t.type}, {"shape", t.shape}, {"bytes", t.bytes}});
  j["tensors"] = ts;
  return j;
}

std::string summary_text(const ModelSummary& s, bool with_tensors) {
  std::string out;
  char buf[512];
  auto line = [&](const char* fmt, auto... args) {
    std::snprintf(buf, sizeof buf, fmt, args...);
    out += buf;
    out += '\n';
  };
  // Names and metadata strings come from the file: escaped (util/printable.h) so a tensor name
  // holding ESC or NUL prints as \x1b / \x00 instead of driving the terminal or cutting the line.
  std::deque<std::string> kept;  // keeps the escaped strings alive (a deque never moves them)
  auto P = [&](const std::string& x) { return kept.emplace_back(printable(x)).c_str(); };
  line("file:         %s (GGUF v%u, %llu bytes)", P(s.file), s.gguf_version,
       (unsigned long long)s.file_size);
  line("identity:     %s", P(s.identity));
  line("architecture: %s (%s)", P(s.architecture), P(s.name));
  line("geometry:     %lld layers, hidden %lld, %lld heads, %lld kv heads, head dim %lld, "
       "ffn %lld, vocab %lld, context %lld",
       (long long)s.layers, (long long)s.hidden, (long long)s.heads, (long long)s.kv_heads,
       (long long)s.head_dim, (long long)s.ffn, (long long)s.vocab, (long long)s.context);
  line("rope:         theta %g, %lld dims, layout %s, scaling %s (factor %g)", s.rope_theta,
       (long long)s.rope_dimensions, P(s.rope_layout), P(s.rope_scaling),
       s.rope_scaling_factor);
  line("norm:         rms eps %g; qkv bias %s, qk norm %s, output %s", s.rms_eps,
       s.qkv_bias ? "yes" : "no", s.qk_norm ? "yes" : "no",
       s.tied_output ? "tied to token_embd" : "separate");
  line("tokenizer:    %s (pre %s), %lld tokens, bos %lld, eos %lld",
       s.tokenizer_model.empty() ? "none" : P(s.tokenizer_model),
       s.tokenizer_pre.empty() ? "-" : P(s.tokenizer_pre), (long long)s.tokenizer_size,
       (long long)s.bos, (long long)s.eos);
  if (!s.synth_outliers.empty())
    line("synthetic:    K outliers and sink %s (ember.synth.outliers)", P(s.synth_outliers));
  std::map<std::string, int> counts;
  for (const auto& t : s.tensors) counts[printable(t.type)]++;
  std::string types;
  for (const auto& [k, v] : counts) types += (types.empty() ? "" : ", ") + k + " " + std::to_string(v);
  line("tensors:      %zu, %llu bytes (%s)", s.tensors.size(),
       (unsigned long long)s.tensor_bytes, types.c_str());
  if (with_tensors) {
    size_t w = 4;
    for (const auto& t : s.tensors) w = std::max(w, printable(t.name).size());
    line("  %-*s  %-6s  %-22s  %s", int(w), "name", "type", "shape", "bytes");
    for (const auto& t : s.tensors) {
      std::string shape = "[";
      for (size_t i = 0; i < t.shape.size(); ++i)
        shape += (i ? ", " : "") + std::to_string(t.shape[i]);
      shape += "]";
      line("  %-*s  %-6s  %-22s  %llu", int(w), P(t.name), P(t.type), shape.c_str(),
           (unsigned long long)t.bytes);
    }
  }
  return out;
}

}  // namespace ember::gguf
