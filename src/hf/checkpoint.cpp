#include "hf/checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>

#include <nlohmann/json.hpp>

#include "gguf/arch.h"
#include "gguf/convert.h"
#include "tokenizer/spec.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/f16.h"
#include "util/json_fields.h"
#include "util/json_strict.h"
#include "util/safetensors.h"

namespace ember::hf {

namespace fs = std::filesystem;
namespace st = ember::safetensors;
using gguf::TensorType;

namespace {

using gguf::Tensor;
using gguf::hf_tensor_name;
using gguf::tensor_name;

// A checkpoint tensor: where its bytes are, and the GGUF name and shape it becomes.
struct Source {
  std::shared_ptr<const st::File> file;
  const st::TensorInfo* info = nullptr;
};

struct Planned {
  std::string hf_name, gguf_name;
  std::vector<uint64_t> hf_shape;  // [out, in] for matrices
  int permute_heads = 0;           // llama Q/K: rows permuted for adjacent-pair RoPE
};

float element(const uint8_t* p, st::Dtype d, size_t i) {
  if (d == st::Dtype::f32) {
    float f;
    std::memcpy(&f, p + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p + 2 * i, 2);
  return d == st::Dtype::f16 ? f16_to_f32(h) : bf16_to_f32(h);
}

// llama.cpp's permute(w, n_head): rows of each head reordered so that HF's rotate-half pairs
// (j, d/2 + j) become adjacent (2j, 2j + 1). GGUF row h*d + 2j + t = HF row h*d + t*d/2 + j.
uint64_t source_row(uint64_t r, uint64_t rows, int heads) {
  if (heads == 0) return r;
  const uint64_t d = rows / uint64_t(heads), h = r / d, i = r % d;
  return h * d + (i % 2) * (d / 2) + i / 2;
}

std::vector<Planned> plan(const HfConfig& c) {
  const uint64_t H = uint64_t(c.hidden), q = uint64_t(c.heads) * c.head_dim, kv = uint64_t(c.kv_heads) * c.head_dim;
  const gguf::ArchInfo& info = gguf::arch_info(gguf::parse_arch(c.arch));
  // HF stores Q/K for rotate-half pairs (i, i + d/2); an architecture whose GGUF pairs are
  // adjacent gets its Q/K rows permuted, as llama.cpp's converter does for llama.
  const bool permute = info.rope_layout == gguf::RopeLayout::normal;
  // One tensor: HF name and shape -> GGUF name (layer -1: a global tensor).
  auto t = [](Tensor tensor, int layer, std::vector<uint64_t> shape, int permute_heads = 0,
              const char* suffix = "weight") {
    return Planned{hf_tensor_name(tensor, layer, suffix), tensor_name(tensor, layer, suffix), std::move(shape),
                   permute_heads};
  };
  std::vector<Planned> p;
  p.push_back(t(Tensor::token_embd, -1, {uint64_t(c.vocab), H}));
  p.push_back(t(Tensor::output_norm, -1, {H}));
  if (!c.tied) p.push_back(t(Tensor::output, -1, {uint64_t(c.vocab), H}));
  for (int l = 0; l < c.layers; ++l) {
    p.push_back(t(Tensor::attn_norm, l, {H}));
    p.push_back(t(Tensor::attn_q, l, {q, H}, permute ? c.heads : 0));
    p.push_back(t(Tensor::attn_k, l, {kv, H}, permute ? c.kv_heads : 0));
    p.push_back(t(Tensor::attn_v, l, {kv, H}));
    if (c.qkv_bias) {
      p.push_back(t(Tensor::attn_q, l, {q}, permute ? c.heads : 0, "bias"));
      p.push_back(t(Tensor::attn_k, l, {kv}, permute ? c.kv_heads : 0, "bias"));
      p.push_back(t(Tensor::attn_v, l, {kv}, 0, "bias"));
    }
    if (info.qk_norm == gguf::Feature::required) {
      p.push_back(t(Tensor::attn_q_norm, l, {uint64_t(c.head_dim)}));
      p.push_back(t(Tensor::attn_k_norm, l, {uint64_t(c.head_dim)}));
    }
    p.push_back(t(Tensor::attn_output, l, {H, q}));
    p.push_back(t(Tensor::ffn_norm, l, {H}));
    p.push_back(t(Tensor::ffn_gate, l, {uint64_t(c.ffn), H}));
    p.push_back(t(Tensor::ffn_up, l, {uint64_t(c.ffn), H}));
    p.push_back(t(Tensor::ffn_down, l, {H, uint64_t(c.ffn)}));
  }
  return p;
}

// A config.json number as the user wrote it, near enough: "1e-50", not to_string's "0.000000".
std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string shape_text(const std::vector<uint64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace

HfConfig read_config(const std::string& path) {
  const std::string text = read_file(path, size_t(16) << 20);
  const nlohmann::json j = parse_json_strict(text, path, 32, 1 << 20);
  StrictObject o(j, "", path);  // HF configs carry many fields; only those read are checked
  HfConfig c;
  c.arch = o.string("model_type", 64);
  const gguf::ArchInfo* info = gguf::find_arch(c.arch);
  if (!info) fail_field(path, "model_type", gguf::arch_names("|"), c.arch);
  if (o.has("architectures")) {
    const auto& a = o.array("architectures", 8);
    if (a.size() != 1 || !a[0].is_string() || a[0].get<std::string>() != info->hf_class)
      fail_field(path, "architectures", std::string("[\"") + info->hf_class + "\"] (as model_type)", a.dump());
  }
  c.hidden = int(o.integer("hidden_size", 1, 1 << 16));
  c.layers = int(o.integer("num_hidden_layers", 1, 1024));
  c.heads = int(o.integer("num_attention_heads", 1, 1024));
  c.kv_heads = o.has("num_key_value_heads") && !j["num_key_value_heads"].is_null()
                   ? int(o.integer("num_key_value_heads", 1, 1024)) : c.heads;
  if (c.heads % c.kv_heads)
    fail_field(path, "num_key_value_heads", "a divisor of num_attention_heads (" + std::to_string(c.heads) + ")",
               std::to_string(c.kv_heads));
  c.head_dim = o.has("head_dim") && !j["head_dim"].is_null() ? int(o.integer("head_dim", 2, 4096)) : c.hidden / c.heads;
  if (c.head_dim % 2 || (!o.has("head_dim") && c.hidden % c.heads))
    fail_field(path, "head_dim", "an even per-head size", std::to_string(c.head_dim));
  c.ffn = int(o.integer("intermediate_size", 1, 1 << 20));
  c.vocab = int(o.integer("vocab_size", 1, 1 << 24));
  c.context = o.has("max_position_embeddings") ? int(o.integer("max_position_embeddings", 1, 1 << 24)) : 2048;
  // Both are written to the GGUF as f32, so the range is checked on the f32 value: a double
  // such as 1e39 or 1e-50 passes a double check and becomes inf or 0, which the GGUF reader
  // (model/config.cpp) refuses after the import has exited 0.
  c.rms_eps = o.number("rms_norm_eps");
  const float eps32 = float(c.rms_eps);
  if (!(eps32 > 0 && eps32 < 1))
    fail_field(path, "rms_norm_eps", "a number in (0, 1), non-zero as f32 (GGUF stores it as f32)",
               number_text(c.rms_eps) + (c.rms_eps > 0 && c.rms_eps < 1 ? " (0 as f32)" : ""));
  c.rope_theta = o.has("rope_theta") ? o.number("rope_theta") : 10000.0;
  const float theta32 = float(c.rope_theta);
  if (!(theta32 > 1 && std::isfinite(theta32)))
    fail_field(path, "rope_theta", "a number > 1, finite as f32 (at most 3.4e38; GGUF stores it as f32)",
               number_text(c.rope_theta) + (c.rope_theta > 1 ? " (inf as f32)" : ""));
  c.tied = o.has("tie_word_embeddings") ? o.boolean("tie_word_embeddings") : false;
  c.qkv_bias = info->qkv_bias == gguf::Feature::required || (o.has("attention_bias") && o.boolean("attention_bias"));
  if (info->qkv_bias == gguf::Feature::forbidden && c.qkv_bias)
    fail_field(path, "attention_bias", "false (" + c.arch + ")", "true");
  if (o.has("mlp_bias") && o.boolean("mlp_bias")) fail_field(path, "mlp_bias", "false", "true");
  if (o.has("hidden_act") && o.string("hidden_act", 64) != "silu")
    fail_field(path, "hidden_act", "\"silu\"", j["hidden_act"].dump());
  if (o.has("rope_scaling") && !j["rope_scaling"].is_null())
    fail_field(path, "rope_scaling", "null (RoPE scaling is not converted)", j["rope_scaling"].dump());
  if (o.has("sliding_window") && !j["sliding_window"].is_null() && o.has("use_sliding_window") &&
      j["use_sliding_window"].is_boolean() && j["use_sliding_window"].get<bool>())
    fail_field(path, "use_sliding_window", "false", "true");
  c.name = o.has("_name_or_path") ? o.string("_name_or_path", 256) : "";
  return c;
}

ImportSummary import_checkpoint(const std::string& dir, const std::string& out_path, const ImportOptions& opt,
                                bool force) {
  if (opt.type != TensorType::F32 && opt.type != TensorType::F16 && opt.type != TensorType::BF16)
    fail_field("--type", "value", "f32|f16|bf16", gguf::type_name(uint32_t(opt.type)));
  ImportSummary sum;
  const HfConfig c = sum.config = read_config(dir + "/config.json");
  // Every *.safetensors file of DIR, in name order; a tensor in two files is refused.
  std::vector<std::string> files;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail_field(dir, "checkpoint", "a directory (config.json + *.safetensors)", "not a directory");
  fs::directory_iterator entries(dir, ec);
  if (ec) fail_field(dir, "directory", "readable", ec.message());
  for (const auto& e : entries)
    if (e.path().extension() == ".safetensors") files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  if (files.empty()) fail_field(dir, "*.safetensors", "at least one file", "none");
  std::map<std::string, Source> by_name;
  for (const std::string& f : files) {
    auto file = std::make_shared<const st::File>(st::File::open(dir + "/" + f));
    for (const auto& t : file->header().tensors) {
      if (by_name.count(t.name))
        fail_field(dir + "/" + f, "tensor \"" + t.name + "\"", "in one file only",
                   "also in " + by_name[t.name].file->path());
      by_name[t.name] = {file, &t};
    }
    sum.source_files.push_back(f);
  }
  const std::vector<Planned> planned = plan(c);
  std::map<std::string, const Planned*> wanted;
  for (const auto& p : planned) wanted[p.hf_name] = &p;
  for (const auto& [name, src] : by_name) {
    if (wanted.count(name)) continue;
    if (name.size() > 20 && name.compare(name.size() - 20, 20, "rotary_emb.inv_freq") == 0) {
      sum.skipped.push_back(name);  // a recomputable buffer, as llama.cpp's converter skips it
      continue;
    }
    if (name == "lm_head.weight" && c.tied) {
      sum.skipped.push_back(name);  // tied: the embedding is the head (llama.cpp drops it too)
      continue;
    }
    fail_field(src.file->path(), "tensor \"" + name + "\"",
               "a " + c.arch + " weight for this config.json (" + std::to_string(c.layers) + " layers" +
                   (c.tied ? ", tied head" : "") + ")",
               "an unexpected tensor");
  }

  gguf::GgufWriter w;
  gguf::write_arch_metadata(w, {c.arch, c.name.empty() ? fs::path(dir).filename().string() : c.name, c.layers,
                                c.context, c.hidden, c.ffn, c.heads, c.kv_heads, c.head_dim, c.vocab, c.rope_theta,
                                c.rms_eps});
  w.set_u32("general.file_type", gguf::llama_file_type(opt.type));
  if (opt.tokenizer) {
    const std::string tj = dir + "/tokenizer.json";
    if (!path_exists(tj))
      fail_field(dir, "tokenizer.json", "present (or --no-tokenizer for a GGUF without tokenizer metadata)", "none");
    tok::TokenizerSpec spec = tok::spec_from_json_file(tj);
    sum.tokenizer_tokens = int(spec.tokens.size());
    if (spec.tokens.size() > size_t(c.vocab))
      fail_field(tj, "vocabulary", "at most " + std::to_string(c.vocab) + " tokens (config.json vocab_size)",
                 std::to_string(spec.tokens.size()));
    // The embedding may have more rows than the tokenizer has tokens (Qwen: 151936 rows);
    // llama.cpp's converter pads the token list with unused [PAD<i>] tokens to the row count.
    while (spec.tokens.size() < size_t(c.vocab)) {
      spec.tokens.push_back("[PAD" + std::to_string(spec.tokens.size()) + "]");
      spec.types.push_back(tok::TokenType::Unused);
      if (!spec.scores.empty()) spec.scores.push_back(-1e9f);
      ++sum.padded_tokens;
    }
    for (auto& [k, v] : tok::spec_to_gguf_metadata(spec)) w.set(k, v);
  }

  for (const Planned& p : planned) {
    const auto it = by_name.find(p.hf_name);
    if (it == by_name.end())
      fail_field(dir, "tensor \"" + p.hf_name + "\"", "present (" + c.arch + ", " + shape_text(p.hf_shape) + ")", "none");
    const Source src = it->second;
    const st::TensorInfo& t = *src.info;
    if (t.dtype != st::Dtype::f32 && t.dtype != st::Dtype::f16 && t.dtype != st::Dtype::bf16)
      fail_field(src.file->path(), "tensor \"" + t.name + "\".dtype", "F32|F16|BF16", st::dtype_name(t.dtype));
    if (t.shape != p.hf_shape)
      fail_field(src.file->path(), "tensor \"" + t.name + "\".shape", shape_text(p.hf_shape) + " (config.json)",
                 shape_text(t.shape));
    const bool matrix = p.hf_shape.size() == 2;
    const TensorType to = matrix ? opt.type : TensorType::F32;
    const uint64_t rows = matrix ? p.hf_shape[0] : 1, cols = matrix ? p.hf_shape[1] : p.hf_shape[0];
    std::vector<uint64_t> gshape = matrix ? std::vector<uint64_t>{cols, rows} : std::vector<uint64_t>{cols};
    const int perm = p.permute_heads;
    w.add_tensor(p.gguf_name, gshape, to, [src, rows, cols, perm, to, matrix](ByteSink& out) {
      const uint8_t* base = src.file->bytes(*src.info).data();
      const st::Dtype d = src.info->dtype;
      std::vector<float> row(cols);
      std::vector<uint8_t> scratch;
      for (uint64_t r = 0; r < rows; ++r) {
        if (matrix) {
          const uint64_t s = source_row(r, rows, perm);
          for (uint64_t i = 0; i < cols; ++i) row[i] = element(base, d, size_t(s * cols + i));
        } else {
          for (uint64_t i = 0; i < cols; ++i) row[i] = element(base, d, size_t(source_row(i, cols, perm)));
        }
        gguf::encode_row(to, row.data(), int64_t(cols), scratch, out);
      }
    });
    ++sum.tensors;
  }
  w.write_file(out_path, force);
  return sum;
}

}  // namespace ember::hf
