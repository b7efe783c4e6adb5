#pragma once
// The weights of a loaded model: matrices are views into the GGUF mapping (no copy, any
// weight type the matmul kernels support); norms and biases are small f32 vectors.
// Internal to src/model (the Engine reads them); other layers see only model/engine.h.
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/config.h"
#include "model/engine.h"
#include "ops/matmul.h"

namespace ember::model {

struct LayerWeights {
  ops::WeightMatrix wq;      // (n_heads*head_dim, n_embd)
  ops::WeightMatrix wk, wv;  // (n_kv_heads*head_dim, n_embd)
  ops::WeightMatrix wo;      // (n_embd, n_heads*head_dim)
  ops::WeightMatrix w_gate, w_up;  // (n_ff, n_embd); w_gate unset for a GELU MLP
  ops::WeightMatrix w_down;        // (n_embd, n_ff)
  std::vector<float> attn_norm, ffn_norm;  // [n_embd]
  std::vector<float> bq;                   // [n_heads*head_dim]     (qkv_bias)
  std::vector<float> bk, bv;               // [n_kv_heads*head_dim]  (qkv_bias)
  std::vector<float> q_norm, k_norm;       // [head_dim]             (qk_norm)
};

struct ModelWeights {
  ops::WeightMatrix token_embd;  // (n_vocab, n_embd): rows are dequantized for embed()
  ops::WeightMatrix output;      // (n_vocab, n_embd); the token_embd view when tied
  std::vector<float> output_norm;  // [n_embd]
  std::vector<LayerWeights> layers;
  std::vector<std::string> matrix_types;  // sorted distinct GGML type names of the matrices
};

// The weights behind a Model returned by Model::load (Error if it is some other Model).
const ModelWeights& weights_of(const Model& model);

}  // namespace ember::model
