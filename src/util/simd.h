#pragma once
// Run-time choice of the SIMD path. All paths give bit-identical results (docs/numerics.md);
// the choice only changes speed. EMBER_SIMD=scalar|avx2|avx512 forces a path for tests and
// benchmarks (also avx512vnni): this is the one environment variable ember's core reads, by
// design.
#include <string>
#include <string_view>
#include <vector>

namespace ember {

// Ordered: each level includes the ones below it.
enum class SimdLevel { scalar = 0, avx2 = 1, avx512 = 2, avx512vnni = 3 };

const char* simd_name(SimdLevel level);
// What this CPU supports (AVX2 requires AVX2+FMA+F16C; AVX-512 requires F, BW, VL, DQ;
// avx512vnni adds AVX512_VNNI).
SimdLevel detect_simd();
// The path in use: EMBER_SIMD if set (an unsupported or unknown value is an Error naming
// it), else detect_simd(). Evaluated once per process unless set_simd_override() is called.
SimdLevel active_simd();
// For tests: force a level (must be supported) for the rest of the process.
void set_simd_override(SimdLevel level);
SimdLevel parse_simd(const std::string& name);
// parse_simd, then refuses a path this CPU lacks; errors name `where` and `field` (a flag, or
// EMBER_SIMD's "value"), so a caller can check a value before it starts anything with it.
SimdLevel parse_supported_simd(const std::string& name, std::string_view where, std::string_view field);
// Every level this CPU supports, scalar first (tests iterate over them).
std::vector<SimdLevel> supported_simd_levels();

}  // namespace ember
