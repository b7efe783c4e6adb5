// The SIMD path names, the table of levels and the CPU checks: tests iterate over
// supported_simd_levels(), so a path missing from it would silently go untested.
#include "util/simd.h"

#include <cpuid.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "util/error.h"

namespace ember::simd_test {
namespace {

bool has(const std::vector<SimdLevel>& v, SimdLevel l) { return std::find(v.begin(), v.end(), l) != v.end(); }

TEST(Simd, NamesRoundTrip) {
  ASSERT_EQ(all_simd_levels().size(), 6u);
  for (SimdLevel l : all_simd_levels()) EXPECT_EQ(parse_simd(simd_name(l)), l);
  EXPECT_EQ(parse_simd("avxvnni-evex"), SimdLevel::avxvnni_evex);
  EXPECT_THROW(parse_simd("avx512_vnni"), Error);
  EXPECT_THROW(parse_simd("avx_vnni"), Error);
  EXPECT_THROW(parse_simd(""), Error);
}

TEST(Simd, BaseIsTheRegisterWidth) {
  EXPECT_EQ(simd_base(SimdLevel::scalar), SimdLevel::scalar);
  for (SimdLevel l : {SimdLevel::avx2, SimdLevel::avxvnni, SimdLevel::avxvnni_evex}) EXPECT_EQ(simd_base(l), SimdLevel::avx2);
  for (SimdLevel l : {SimdLevel::avx512, SimdLevel::avx512vnni}) EXPECT_EQ(simd_base(l), SimdLevel::avx512);
}

TEST(Simd, SupportedLevelsAreThoseTheCpuRunsInTableOrder) {
  const std::vector<SimdLevel> levels = supported_simd_levels();
  ASSERT_FALSE(levels.empty());
  EXPECT_EQ(levels.front(), SimdLevel::scalar);
  EXPECT_TRUE(has(levels, detect_simd()));
  for (size_t i = 1; i < levels.size(); ++i) EXPECT_LT(int(levels[i - 1]), int(levels[i]));
  for (SimdLevel l : all_simd_levels()) EXPECT_EQ(simd_supported(l), has(levels, l)) << simd_name(l);
  // Every vector level needs the AVX2 base.
  for (SimdLevel l : levels) {
    if (l != SimdLevel::scalar) {
      EXPECT_TRUE(simd_supported(SimdLevel::avx2)) << simd_name(l);
    }
  }
}

TEST(Simd, DetectionAgreesWithTheCpu) {
  __builtin_cpu_init();
  unsigned a = 0, b = 0, c = 0, d = 0;
  const bool avx_vnni = __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4)) != 0;
  const bool avx2 = simd_supported(SimdLevel::avx2);
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") && avx2;
  const bool vnni512 = __builtin_cpu_supports("avx512vnni");
  EXPECT_EQ(simd_supported(SimdLevel::avxvnni), avx2 && avx_vnni);
  EXPECT_EQ(simd_supported(SimdLevel::avxvnni_evex),
            avx2 && __builtin_cpu_supports("avx512vl") && vnni512);
  // Preference: avx512vnni, avx512, avxvnni, avx2; the EVEX twin never.
  if (avx512 && vnni512) EXPECT_EQ(detect_simd(), SimdLevel::avx512vnni);
  else if (avx512) EXPECT_EQ(detect_simd(), SimdLevel::avx512);
  else if (avx2 && avx_vnni) EXPECT_EQ(detect_simd(), SimdLevel::avxvnni);
  else if (avx2) EXPECT_EQ(detect_simd(), SimdLevel::avx2);
  else EXPECT_EQ(detect_simd(), SimdLevel::scalar);
  EXPECT_NE(detect_simd(), SimdLevel::avxvnni_evex);
}

TEST(Simd, AnUnsupportedPathIsRefusedNamingTheSupportedOnes) {
  for (SimdLevel l : all_simd_levels()) {
    if (simd_supported(l)) continue;
    try {
      parse_supported_simd(simd_name(l), "EMBER_SIMD", "value");
      ADD_FAILURE() << simd_name(l);
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(std::string("EMBER_SIMD: value: expected a path this CPU supports (scalar"), 0), 0u)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace ember::simd_test
