#pragma once
// What `ember model inspect` reports about a GGUF model: architecture, geometry, RoPE,
// tokenizer, tensor table and identity, read directly from metadata and leniently, so that
// inspect works on files the engine cannot run. An optional key the file leaves out reads as
// the engine's default for its architecture (gguf/arch.h: RoPE theta, RMS epsilon, context
// length), so the two report the same values; for an architecture outside the table a
// missing key reads as 0 / "". The engine's strict reader is model::ModelConfig::from_gguf.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf/gguf_file.h"

namespace ember::gguf {

struct ModelSummary {
  std::string file, identity, architecture, name;
  uint32_t gguf_version = 0;
  uint64_t file_size = 0, alignment = 0;
  int64_t layers = 0, hidden = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0, vocab = 0;
  int64_t context = 0;
  double rope_theta = 0;
  int64_t rope_dimensions = 0;
  std::string rope_layout;   // normal | neox (gguf/arch.h) | unknown (not in the table)
  std::string rope_scaling;  // none | linear | yarn | llama3 | rope_freqs
  double rope_scaling_factor = 1;
  double rms_eps = 0;
  bool qkv_bias = false, qk_norm = false, tied_output = false;
  std::string tokenizer_model, tokenizer_pre;
  int64_t tokenizer_size = 0, bos = -1, eos = -1;
  int64_t file_type = -1;
  // `model synth --outliers`: the spec (ember.synth.outliers), "" when the file has none.
  std::string synth_outliers;
  struct Tensor {
    std::string name, type;
    std::vector<uint64_t> shape;
    uint64_t bytes = 0;
  };
  std::vector<Tensor> tensors;
  uint64_t tensor_bytes = 0;
};

// Hashes every tensor for the identity (reads the whole file once).
ModelSummary summarize(const GgufFile& file);
// Fixed key order (docs/formats/gguf.md, "ember model inspect").
nlohmann::ordered_json summary_json(const ModelSummary& s);
std::string summary_text(const ModelSummary& s, bool with_tensors = true);

}  // namespace ember::gguf
