#pragma once
// Synthetic models: deterministic random weights of a given geometry, written exactly as
// llama.cpp's converter writes that architecture (tensor names, metadata keys), with a
// built-in byte-level tokenizer, so tests and demos never need a download.
// Format and scales: docs/formats/gguf.md, "ember synthetic models".
#include <cstdint>
#include <string>
#include <vector>

#include "gguf/synth_outliers.h"
#include "gguf/types.h"
#include "gguf/writer.h"

namespace ember::gguf {

struct SynthSpec {
  std::string arch = "llama";  // a name of the architecture table (gguf/arch.h)
  std::string name;            // general.name; "" -> "ember-synth-<arch>-s<seed>"
  int64_t layers = 0, hidden = 0, heads = 0, kv_heads = 0;
  int64_t head_dim = 0;        // 0 -> hidden / heads
  int64_t ffn = 0, vocab = 0;
  int64_t context = 0;         // <arch>.context_length; 0 -> 4096
  double rope_theta = 0;       // 0 -> the architecture's (ArchInfo::rope_theta)
  double rms_eps = 0;          // 0 -> the architecture's (ArchInfo::synth_rms_eps)
  bool qkv_bias = false, qk_norm = false, tied = false;
  // llama3 RoPE frequency scaling (Llama 3.1/3.2): written as the rope_freqs.weight tensor,
  // as llama.cpp's converter does, plus ember.rope.scaling.* keys recording the parameters.
  bool rope_llama3 = false;
  double rope_factor = 1, rope_low_freq = 1, rope_high_freq = 4;
  int64_t rope_original_context = 0;
  TensorType type = TensorType::F32;
  uint64_t seed = 0;
  // The toy-model MLP and norm (model/config.h; llama only, written as ember.toy.* keys when
  // not the defaults): swiglu | gelu (no ffn_gate tensor), rmsnorm | layernorm.
  std::string ffn_activation = "swiglu", norm = "rmsnorm";
  // tokenizer.ggml.pre: "bloom" (llama.cpp knows it; for the synthetic vocabulary it gives the
  // ids "ember-bytes" gives on valid UTF-8; `ember model synth` writes it by default) or
  // "ember-bytes" (no split, any bytes; llama.cpp refuses the name). The library default stays
  // "ember-bytes" so that the files tests pin (Synth.PinnedBytesAcrossMachines, the GGUF fuzz
  // seeds) and every identity derived from them are unchanged.
  std::string pre_tokenizer = "ember-bytes";
  // K outlier pairs and a BOS attention sink (gguf/synth_outliers.h), recorded as the
  // ember.synth.outliers key; inactive by default (the files written before are unchanged).
  OutlierSpec outliers;
};

// The real geometries: qwen2.5-0.5b, qwen2.5-1.5b, llama-3.2-1b, qwen3-0.6b (Error otherwise).
SynthSpec synth_preset(const std::string& name);
std::vector<std::string> synth_preset_names();

// Fills defaults and checks the geometry; Error naming the flag on anything inconsistent.
SynthSpec resolve_synth_spec(SynthSpec spec);

struct SynthTensorNote {  // a matrix stored in another type than asked (row length)
  std::string name;
  TensorType type;
};

// A writer holding the whole model; tensor bytes are generated while writing (streaming).
// `fallbacks` (optional) receives the matrices whose type fell back.
GgufWriter synth_model(const SynthSpec& spec, std::vector<SynthTensorNote>* fallbacks = nullptr);

// A model derived from `base` (`ember model synth --derive-from`): the same metadata,
// geometry, tensor names, shapes and types, sharing its lower part byte for byte and re-drawn
// above it, so that map::shared_layers finds exactly s = share_layers:
//   kept:      token_embd.weight, rope_freqs.weight (computed, not random), every tensor of
//              blk.0 .. blk.(share_layers-1), and any other tensor outside blk.* and output*;
//   re-drawn:  every tensor of blk.share_layers .. blk.(L-1), output_norm.weight and, when the
//              model is untied, output.weight (the upper part of the network is what a
//              fine-tune of the top changes; a tied model's LM head is token_embd, kept).
// Re-drawn tensors use the synthetic initialization (norms 1 + N(0, 0.05^2), biases
// N(0, 0.05^2), matrices N(0, 1/row_length), output.weight N(0, 4/hidden)) from `seed`
// (salted, so a base synthesized with the same seed still differs), encoded in the base
// tensor's own type. general.name gets a "-derived-s<S>" suffix; ember.derive.share_layers
// and ember.derive.seed record the derivation. Error naming the base file and the field when
// share_layers is outside [0, L] or a re-drawn tensor's type has no encoder.
// `base` must outlive the writer's write (the kept tensors are streamed from its mapping).
GgufWriter derive_model(const GgufFile& base, int64_t share_layers, uint64_t seed);

}  // namespace ember::gguf
