// The avxvnni kernels (kernels_avxvnni.cpp) with the EVEX encoding of the same instructions,
// vpdpbusd on ymm from AVX512-VNNI + AVX512VL (-mavx512vl -mavx512vnni, ymm16-31
// reserved: CMakeLists.txt). The avxvnni-evex path of util/simd.h: a validation device, so
// that a CPU with AVX512-VNNI and no AVX-VNNI (Zen 4) runs the avxvnni kernel source in the
// bit-exactness tests and the benchmarks. Never picked automatically.
#define EMBER_AVX2_VNNI 2
#include "ops/kernels_avx2.cpp"
