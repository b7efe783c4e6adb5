// EMBER_CHECK / EMBER_DCHECK (util/error.h).
#include <gtest/gtest.h>

#include "util/error.h"

namespace ember {
namespace {

// EMBER_DCHECK: compiled out, its condition unevaluated, under NDEBUG unless EMBER_DCHECK_ON
// (the sanitizer build); otherwise EMBER_CHECK, which aborts naming the condition.
TEST(Check, DcheckIsCompiledOutUnderNdebugOnly) {
  int evaluated = 0;
  auto cond = [&] { return ++evaluated > 0; };
  EMBER_DCHECK(cond());
#if defined(NDEBUG) && !defined(EMBER_DCHECK_ON)
  EXPECT_EQ(evaluated, 0);
#else
  EXPECT_EQ(evaluated, 1);
  EXPECT_DEATH(EMBER_DCHECK(evaluated < 0), "internal invariant failed: evaluated < 0");
#endif
}

TEST(Check, CheckAbortsNamingTheCondition) {
  const int x = 1;
  EXPECT_DEATH(EMBER_CHECK(x == 2), "internal invariant failed: x == 2");
}

}  // namespace
}  // namespace ember
