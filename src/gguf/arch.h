#pragma once
// The architectures ember runs, stated once: one row per architecture (its name, its Hugging
// Face class, how it pairs RoPE dimensions, the defaults a reader assumes for an absent key,
// the features it requires or forbids) plus the GGUF metadata keys and tensor names every
// architecture shares. llama.cpp's llama-arch.cpp is the model: a fact stated here cannot
// drift between the engine's loader (model/config.cpp), `ember model inspect`
// (gguf/summary.cpp), the two GGUF writers (`model synth`, `model import-hf`, both through
// write_arch_metadata), the snapshot manifest's rule on model.architecture and the CLI help.
//
// Why in gguf/ and not model/: the facts are GGUF's vocabulary (key and tensor names, the
// values a file may leave out), and three of the readers sit where model/ cannot be reached:
// gguf/summary.cpp and gguf/synth.cpp are below model/, and hf/ links gguf/ but not model/.
// Moving those up to model/ would make `model inspect` depend on the engine, which it must
// not (it reads files the engine refuses). model::Arch and model::RopeLayout are this file's
// enums under their old names (model/config.h).
//
// Adding an architecture: a row in kArchs (arch.cpp) and an enumerator below; then the
// engine's forward pass where the new architecture computes something new
// (docs/architecture.md, "How to add an architecture").
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ember::gguf {

class GgufWriter;

enum class Arch { llama, qwen2, qwen3 };

// How RoPE pairs dimensions. normal: (2i, 2i+1) adjacent pairs, as GGUF `llama` files store
// Q/K (GGML rope mode 0; llama.cpp's converter permutes HF's Q/K rows for it). neox:
// (i, i + d/2), as `qwen2`/`qwen3` (GGML mode 2, HF rotate-half, no permutation).
enum class RopeLayout { normal, neox };

// Whether an architecture's blocks have a feature (Q/K/V biases, per-head Q/K norm).
enum class Feature { forbidden, optional, required };

struct ArchInfo {
  Arch arch;
  const char* name;      // general.architecture, the prefix of its keys, HF's model_type
  const char* hf_class;  // HF config.json "architectures": [hf_class]
  RopeLayout rope_layout;
  // What a reader assumes when the file leaves a key out: the engine's values, which `model
  // inspect` reports too.
  double rope_theta;     // <arch>.rope.freq_base
  double rms_eps;        // <arch>.attention.layer_norm_rms_epsilon
  int64_t context;       // <arch>.context_length
  // What `ember model synth` writes when not told: the released models' value.
  double synth_rms_eps;
  Feature qkv_bias;      // blk.N.attn_{q,k,v}.bias
  Feature qk_norm;       // blk.N.attn_{q,k}_norm.weight (before RoPE)
  // Metadata the writers add: key_length/value_length even when head_dim = hidden / heads
  // (llama.cpp's converter writes them for qwen3), vocab_size and rope.dimension_count (it
  // writes those for llama).
  bool head_dim_keys;
  bool vocab_and_rope_dims;
  bool rope_freqs;       // llama3 RoPE scaling through a rope_freqs.weight tensor
  bool toy_models;       // ember.toy.ffn_activation / ember.toy.norm (study recompute-anchor)
};

// Every row, in the order of Arch.
const std::vector<ArchInfo>& archs();
const ArchInfo& arch_info(Arch a);
// nullptr when `name` is no architecture ember runs (lenient readers: `model inspect`).
const ArchInfo* find_arch(std::string_view name);
// Error "<where>: <field>: expected llama, qwen2 or qwen3, found '<name>'" when unknown.
const ArchInfo& require_arch(std::string_view name, const std::string& where,
                             const std::string& field);
const char* arch_name(Arch a);
Arch parse_arch(const std::string& name);  // Error naming the value if unsupported
const char* rope_layout_name(RopeLayout l);  // "normal" | "neox"

// The names of the architectures with `pred` (all when none), joined: ("|") -> "llama|qwen2|
// qwen3"; (", ", " or ") -> "llama, qwen2 or qwen3". For help strings and error messages.
std::string arch_names(std::string_view sep, std::string_view last_sep = {},
                       bool (*pred)(const ArchInfo&) = nullptr);

// ---- Metadata keys: "<arch>.<suffix>" (llama.cpp's LLM_KV names) ------------------------
enum class Key {
  context_length, embedding_length, block_count, feed_forward_length, vocab_size,
  head_count, head_count_kv, key_length, value_length, rms_eps,
  rope_dimension_count, rope_freq_base,
  rope_scaling_type, rope_scaling_factor, rope_scaling_original_context,
  rope_scaling_low_freq, rope_scaling_high_freq,
};
std::string key(std::string_view arch, Key k);  // key("qwen2", Key::head_count) -> "qwen2.attention.head_count"

// ---- Tensor names (llama.cpp's LLM_TENSOR names), and the Hugging Face names they come from
enum class Tensor {
  token_embd, rope_freqs, output_norm, output,  // global
  attn_norm, attn_q, attn_k, attn_v, attn_q_norm, attn_k_norm, attn_output,  // per block
  ffn_norm, ffn_gate, ffn_up, ffn_down,
};
// tensor_name(Tensor::attn_q, 3, "bias") -> "blk.3.attn_q.bias"; global tensors take layer -1.
std::string tensor_name(Tensor t, int layer = -1, std::string_view suffix = "weight");
// The same tensor in a Hugging Face checkpoint (identical for llama, qwen2 and qwen3):
// hf_tensor_name(Tensor::attn_q, 3, "bias") -> "model.layers.3.self_attn.q_proj.bias".
std::string hf_tensor_name(Tensor t, int layer = -1, std::string_view suffix = "weight");

// ---- The one writer of the architecture block -------------------------------------------
// The hyper-parameters both GGUF writers (`model synth`, `model import-hf`) record.
struct ArchHparams {
  std::string arch, name;  // general.architecture, general.name
  int64_t layers = 0, context = 0, hidden = 0, ffn = 0, heads = 0, kv_heads = 0,
          head_dim = 0, vocab = 0;
  double rope_theta = 0, rms_eps = 0;
};
// general.architecture, general.type = "model", general.name, then the <arch>.* keys, in the
// order llama.cpp's converter writes them (the bytes of synthetic and imported models are
// pinned by SynthPins.* and ImportPins.*). `arch` must be a row of the table.
void write_arch_metadata(GgufWriter& w, const ArchHparams& h);

}  // namespace ember::gguf
