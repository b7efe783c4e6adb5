#pragma once
// Which leading layers two models share byte for byte. The recompute anchor reuses the
// source's K/V of layers [0, s) and its residual at boundary s unchanged, which is exact only
// if the embeddings and those layers are the same function in both models: same architecture
// hyper-parameters, same token embedding, and the same tensors (names, types, shapes, bytes,
// compared by gguf::tensor_hash) in blk.0 .. blk.(s-1).
#include <string>

#include "gguf/gguf_file.h"
#include "model/config.h"

namespace ember::map {

struct SharedLayers {
  int layers = 0;          // s: the number of leading layers shared (0 if the embeddings differ)
  std::string first_diff;  // the first tensor or hyper-parameter that differs ("" if all shared)
};

SharedLayers shared_layers(const gguf::GgufFile& source, const model::ModelConfig& source_config,
                           const gguf::GgufFile& target, const model::ModelConfig& target_config);

// Error naming the first differing tensor when fewer than `s` layers are shared.
void require_shared(const SharedLayers& found, int s, const std::string& where);

}  // namespace ember::map
