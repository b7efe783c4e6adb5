#pragma once
// Run-time choice of the SIMD path. All paths give bit-identical results (docs/numerics.md);
// the choice only changes speed. EMBER_SIMD=NAME forces a path for tests and benchmarks
// (scalar, avx2, avxvnni, avxvnni-evex, avx512, avx512vnni): this is the one environment
// variable ember's core reads, by design.
#include <string>
#include <string_view>
#include <vector>

namespace ember {

// Every path ember has, in one table (simd.cpp: name, register width, CPU check, whether
// detect_simd() may pick it). Ordered by register width and then preference, which is all the
// order means: a CPU may support a level and not one below it (Zen 4 has avx512vnni but not
// avxvnni), so support is asked level by level (simd_supported), never by comparing levels.
//   avxvnni:      the AVX2 kernels with AVX-VNNI's vpdpbusd / vpdpwssd (VEX, ymm) for the int8
//                 dot products (Alder Lake and later, Zen 5).
//   avxvnni_evex: the same kernel source compiled with the AVX512-VNNI + AVX512VL encoding of
//                 the same instructions on ymm registers: a validation device, so that a CPU
//                 with AVX-512 VNNI but no AVX-VNNI tests and times the avxvnni kernels. Never
//                 picked by detect_simd(); only EMBER_SIMD, set_simd_override or tests.
enum class SimdLevel { scalar = 0, avx2 = 1, avxvnni = 2, avxvnni_evex = 3, avx512 = 4, avx512vnni = 5 };

const char* simd_name(SimdLevel level);
// Every level ember knows, in enum order (tests name the ones this CPU lacks).
std::vector<SimdLevel> all_simd_levels();
// The register width of a level's kernels: scalar, avx2 (ymm: avx2, avxvnni, avxvnni-evex) or
// avx512 (zmm: avx512, avx512vnni). Kernels that do not multiply int8 (activations, vec,
// quantize_act) dispatch on this.
SimdLevel simd_base(SimdLevel level);
// Whether this CPU runs `level` (AVX2 requires AVX2+FMA+F16C; avxvnni adds AVX-VNNI (CPUID
// leaf 7 subleaf 1 EAX bit 4); avxvnni-evex adds AVX512 F, VL and VNNI; AVX-512 requires F,
// BW, VL, DQ, and avx512vnni adds AVX512_VNNI).
bool simd_supported(SimdLevel level);
// The best supported level that may be picked automatically: avx512vnni, avx512, avxvnni,
// avx2, scalar in that order of preference.
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
// Every level this CPU supports, in enum order, scalar first (tests iterate over them).
std::vector<SimdLevel> supported_simd_levels();

}  // namespace ember
