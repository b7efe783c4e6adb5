// The SIMD path names and their order: tests iterate over supported_simd_levels(), so a path
// missing from it would silently go untested.
#include "util/simd.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace ember {
namespace {

TEST(Simd, NamesRoundTrip) {
  for (SimdLevel l : {SimdLevel::scalar, SimdLevel::avx2, SimdLevel::avx512, SimdLevel::avx512vnni})
    EXPECT_EQ(parse_simd(simd_name(l)), l);
  EXPECT_THROW(parse_simd("avx512_vnni"), Error);
  EXPECT_THROW(parse_simd(""), Error);
}

TEST(Simd, SupportedLevelsAreEveryLevelUpToTheDetectedOne) {
  const std::vector<SimdLevel> levels = supported_simd_levels();
  ASSERT_FALSE(levels.empty());
  EXPECT_EQ(levels.front(), SimdLevel::scalar);
  EXPECT_EQ(levels.back(), detect_simd());
  for (size_t i = 0; i < levels.size(); ++i) EXPECT_EQ(int(levels[i]), int(i));
}

TEST(Simd, DetectionAgreesWithTheCompilerBuiltins) {
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  if (avx512 && __builtin_cpu_supports("avx512vnni")) EXPECT_EQ(detect_simd(), SimdLevel::avx512vnni);
  else if (avx512) EXPECT_EQ(detect_simd(), SimdLevel::avx512);
  else EXPECT_LE(int(detect_simd()), int(SimdLevel::avx2));
}

}  // namespace
}  // namespace ember
