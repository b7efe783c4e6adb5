#pragma once
// An independent, straightforward f64 forward pass written only for tests. It reads the
// GGUF metadata and tensors itself (not ModelConfig or the engine's weights), dequantizes
// every tensor to f64, and evaluates the textbook transformer with libm exp/cos/sin in f64,
// no KV cache rounding and no shared kernels, so agreement with the engine is evidence.
#include <cstdint>
#include <vector>

#include "gguf/gguf_file.h"

namespace ember::test {

// logits [n][n_vocab] for every position of `tokens` (positions 0..n-1).
// f16_attention: round Q, K, V (after RoPE) and the attention probabilities to f16, the
// operand precision the engine's contract fixes (docs/numerics.md); everything else stays
// f64. Without it the pass is exact f64 throughout. If residuals is given, it receives the
// residual stream [n][n_embd] at each layer boundary 0..n_layers.
std::vector<double> reference_logits(const gguf::GgufFile& file, const std::vector<int32_t>& tokens,
                                     bool f16_attention,
                                     std::vector<std::vector<double>>* residuals = nullptr);

}  // namespace ember::test
