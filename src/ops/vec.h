#pragma once
// Small vector kernels used by the engine outside matmul. Each is elementwise (no reduction),
// so the vector twins are bit-identical to the scalar loops by construction: every lane does
// the scalar operation (explicit FMA where the scalar code writes std::fma).
#include <cstdint>

namespace ember::ops {

// y[i] = fma(a, x[i], y[i]).  x (n,), y (n,)
void axpy_f32(float a, const float* x, float* y, int64_t n);
// dst[i] = f16 -> f32 (exact).  src (n,) f16 bit patterns -> dst (n,)
void f16_to_f32_row(const uint16_t* src, float* dst, int64_t n);
// dst[i] = f32 -> f16, round to nearest even (util/f16.h).  src (n,) -> dst (n,)
void f32_to_f16_row(const float* src, uint16_t* dst, int64_t n);

}  // namespace ember::ops
