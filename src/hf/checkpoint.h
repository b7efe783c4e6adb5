#pragma once
// Hugging Face checkpoints in: a directory of config.json + *.safetensors (+ tokenizer.json)
// for llama, qwen2 and qwen3, converted to a GGUF that ember and llama.cpp both read, as
// llama.cpp's convert_hf_to_gguf.py writes it (docs/hf.md, "ember model import-hf").
//
// Design goals: fail closed (every config field read is type- and range-checked, every
// tensor name is known and every shape is the config's, nothing silently skipped except
// the non-persistent rotary_emb.inv_freq buffers); stream (each tensor is converted row by
// row from the mapped safetensors file into the GGUF writer; nothing is held twice).
// Non-goals: other architectures, RoPE scaling (refused by name), quantized checkpoints
// (GPTQ/AWQ: refused by dtype), quantized output (use `ember model quantize` after).
#include <cstdint>
#include <string>
#include <vector>

#include "gguf/types.h"
#include "gguf/writer.h"

namespace ember::hf {

// The config.json fields the conversion uses (others are ignored: HF configs carry many).
struct HfConfig {
  std::string arch;  // model_type: llama | qwen2 | qwen3
  int hidden = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0, vocab = 0;
  int context = 0;      // max_position_embeddings
  double rms_eps = 0, rope_theta = 0;
  bool tied = false;     // tie_word_embeddings
  bool qkv_bias = false; // qwen2: always; llama: attention_bias
  std::string name;      // general.name
};

// Strict read of `path` (duplicate keys refused; each used field checked, naming it).
HfConfig read_config(const std::string& path);

struct ImportOptions {
  gguf::TensorType type = gguf::TensorType::F32;  // matrices: F32 | F16 | BF16; 1-D stay F32
  bool tokenizer = true;  // read DIR/tokenizer.json (false: a GGUF without tokenizer metadata)
};

struct ImportSummary {
  HfConfig config;
  int tensors = 0;
  std::vector<std::string> source_files;  // the *.safetensors read, in order
  std::vector<std::string> skipped;       // rotary_emb.inv_freq buffers
  int tokenizer_tokens = 0, padded_tokens = 0;
};

// Converts DIR to a GGUF written atomically to out_path (no overwrite without force).
ImportSummary import_checkpoint(const std::string& dir, const std::string& out_path, const ImportOptions& options,
                                bool force);

}  // namespace ember::hf
