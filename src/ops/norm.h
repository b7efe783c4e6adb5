#pragma once
// RMSNorm and LayerNorm of the canonical-v1 contract (docs/numerics.md).
#include <cstdint>

namespace ember::ops {

// y = (x * s) * w with s = 1 / sqrt(dot_f32(x, x, n) / n + eps), every step an f32 IEEE
// operation and the sum of squares the canonical dot (ops/dot.h), so the result depends only
// on x, w, n and eps. x (n,), w (n,) -> y (n,); y may alias x.
void rmsnorm_row(const float* x, const float* w, int64_t n, float eps, float* y);

// LayerNorm without bias: m = (x_0 + x_1 + ...) / n, v = ((x_0 - m)^2 + ...) / n (sequential f32
// adds in increasing i), y = ((x - m) * s) * w with s = 1 / sqrt(v + eps). Used only by the toy
// models of `study recompute-anchor --norm layernorm`. x (n,), w (n,) -> y (n,); y may alias x.
void layernorm_row(const float* x, const float* w, int64_t n, float eps, float* y);

}  // namespace ember::ops
