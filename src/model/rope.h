#pragma once
// Rotary position embedding of the canonical-v1 contract (docs/numerics.md).
//
// Pair i of a head (i in [0, head_dim/2)) is (2i, 2i+1) in the normal layout and
// (i, i + head_dim/2) in the NEOX layout. Its angle at absolute position p is
//   angle = p * theta^(-2i/head_dim) / divisor_i        computed in f64,
// with divisor_i = 1 (no scaling), the linear factor, or the llama3 per-pair divisor
// (from `rope_freqs.weight` or computed as Hugging Face does, rounded to f32 like the
// converter stores it). cos and sin are evaluated in f64 and rounded to f32; the rotation is
//   x0' = x0*c - x1*s,  x1' = x0*s + x1*c      (f32 multiplies and adds, no FMA)
// and the inverse rotation uses -s. The inverse is the exact rotation by -angle, not a
// bitwise inverse: rotating then de-rotating returns x within a few ulp.
#include <vector>

#include "model/config.h"

namespace ember::model {

// Per-pair inverse frequencies of one model (f64), and the f32 cos/sin of a position.
class RopeTable {
 public:
  explicit RopeTable(const ModelConfig& config);
  int head_dim() const { return head_dim_; }
  RopeLayout layout() const { return layout_; }
  // cos[head_dim/2], sin[head_dim/2] of absolute position pos (>= 0).
  void cos_sin(int pos, float* cos, float* sin) const;
  // Rotates one head [head_dim] in place with the cos/sin of its position.
  void rotate(const float* cos, const float* sin, float* head, bool inverse) const;

 private:
  int head_dim_;
  RopeLayout layout_;
  std::vector<double> inv_freq_;  // [head_dim/2], divisors applied
};

// Rotates (inverse: de-rotates) one head [head_dim] at absolute position pos, bit-identical
// to what the engine applies to Q and K. For many heads, use a RopeTable.
void apply_rope(const ModelConfig& config, int pos, float* head, bool inverse);

}  // namespace ember::model
