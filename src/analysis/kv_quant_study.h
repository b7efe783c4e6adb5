#pragma once
// What each llama.cpp KV-cache quantization type costs, measured on ember's engine
// (docs/kv-quantization.md): `ember study kv-quant`.
//
// Per prompt t[0..n), with Q = n - 1 - C, the C next-token distributions after t[Q..Q+C) of a
// quantized cache are compared with the native run's (analysis/kv_quant_run.h): by default
// in-loop, every K/V row quantized (and rotated) as the engine writes it, over the whole
// prompt, as llama.cpp does; or, labelled "prefix", a finished native prefix quantized once.
// Each (type, part) quantizes every layer; then, per type (K and V both), one layer at a time
// and one (layer, KV head) at a time, so the report says where the KL comes from. Per
// (layer, KV head) also the relative error ||q - x|| / ||x|| of the native prefix K and V
// quantized, pooled over the prompts: a property of the format, not of the model's use of it.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/kv_quant_run.h"
#include "analysis/perturb.h"
#include "gguf/types.h"
#include "model/engine.h"
#include "util/html_report.h"

namespace ember::analysis {

struct KvQuantStudyOptions {
  std::vector<gguf::TensorType> types;  // default: q8_0 q4_0 q4_1 q5_0 q5_1 iq4_nl
  std::vector<PerturbPart> parts;       // default: k v kv
  int continuation = 8;                 // C: reference tokens predicted per prompt (1..256)
  int top_k = 10;                       // for the top-k overlap (1..1000)
  // llama.cpp's Hadamard rotation of quantized K/V modelled (default, as llama.cpp v0.5.0
  // stores them; a no-op unless head_dim is a multiple of 64) or not (analysis/kv_quantize.h).
  KvRotation rotation = KvRotation::llamacpp;
  KvQuantMode mode = KvQuantMode::in_loop;
  // Per-layer and per-(layer, KV head) figures for each type's K+V: none, layers, or heads
  // (layers and heads; the default).
  enum class Groups { none, layers, heads } groups = Groups::heads;
};
const char* kv_quant_groups_name(KvQuantStudyOptions::Groups g);  // "none" | "layers" | "heads"
KvQuantStudyOptions::Groups parse_kv_quant_groups(const std::string& s, const char* where, const char* flag);

// KL mean, top-1 agreement and mean NLL change of one plan over every (prompt, step).
struct KvQuantFigures {
  double kl_mean = 0, top1 = 0, dnll = 0;
};

struct KvQuantConfig {
  gguf::TensorType type = gguf::TensorType::Q8_0;
  PerturbPart part = PerturbPart::kv;
  // [layer * n_kv_heads + head]: sqrt(sum (q - x)^2 / sum x^2) over every prompt's prefix rows
  // (0 for a part that is not quantized).
  std::vector<double> k_rel_err, v_rel_err;
  std::vector<double> kl;  // every (prompt, step), in prompt order
  double kl_mean = 0, kl_p99 = 0, kl_max = 0;  // p99: nearest rank, ceil(0.99 N)
  int64_t top1_agree = 0;
  double topk_overlap = 0;  // mean |top-k(native) & top-k(quantized)| / k
  double dnll = 0;          // mean NLL(quantized) - NLL(native) of the reference token
  double k_rel_err_mean = 0, v_rel_err_mean = 0;  // over (layer, head)
  uint64_t bytes_per_position = 0;  // llama.cpp's cache, every layer's K and V row
  double bits_per_value = 0;
  // K+V configurations with groups: [layer] only that layer quantized; [layer * n_kv_heads +
  // head] only that head of that layer (empty otherwise).
  std::vector<KvQuantFigures> per_layer, per_layer_head;
};

struct KvQuantStudy {
  KvQuantStudyOptions options;
  std::string model_identity, model_path, prompts_path;
  int n_layers = 0, n_kv_heads = 0, head_dim = 0;
  int prompts = 0, skipped = 0;  // prompts used; prompts shorter than C + 2 tokens
  int64_t steps = 0;             // compared next-token distributions per config
  std::vector<KvQuantConfig> configs;
  std::string json() const;   // canonical: fixed key order, no time or host
  nlohmann::ordered_json json_doc() const;  // the same document (printable_json for a terminal)
  std::string table() const;
  // Self-contained, inline SVG (util/html_report.h); `stamp` names the inputs, build and date.
  std::string html(const html::Stamp& stamp = {}) const;
};

// Runs the study over `prompts` (token ids, BOS included as the caller tokenized them).
// Error naming the option when an option is out of range or the cache row of this model
// cannot be quantized (kv_heads * head_dim not a multiple of 32), or when no prompt is long
// enough.
KvQuantStudy run_kv_quant_study(model::Engine& engine,
                                const std::vector<std::vector<int32_t>>& prompts,
                                KvQuantStudyOptions options);

}  // namespace ember::analysis
