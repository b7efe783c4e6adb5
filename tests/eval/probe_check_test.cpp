// eval::ProbeCheck: each check kind of a pack probe, passing and failing, and the refusals of
// checks that are not data ember can apply (unknown kinds or fields, a tolerance elsewhere
// than numeric, a number that is not one, a regex that does not compile or runs away).
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "eval/probe_check.h"
#include "support/test_support.h"
#include "util/error.h"

namespace ember::eval {
namespace {

using nlohmann::json;

ProbeCheck check(const json& j) { return ProbeCheck::from_json(j, "pack.json: /probes/0 (p)"); }
std::string refusal(const json& j) { return test::error_of([&] { check(j); }); }

TEST(ProbeCheck, ExactComparesTheTrimmedOutput) {
  const ProbeCheck c = check({{"kind", "exact"}, {"value", "park."}});
  EXPECT_TRUE(c.passes("park."));
  EXPECT_TRUE(c.passes(" park.\n"));
  EXPECT_FALSE(c.passes(" park. Then"));
  EXPECT_FALSE(c.passes("Park."));
  EXPECT_FALSE(c.passes(""));
}

TEST(ProbeCheck, ContainsIsACaseSensitiveSubstring) {
  const ProbeCheck c = check({{"kind", "contains"}, {"value", "Lily"}});
  EXPECT_TRUE(c.passes(", there was a girl named Lily. She"));
  EXPECT_FALSE(c.passes(", there was a girl named lily. She"));
  EXPECT_FALSE(c.passes("Lil y"));
}

TEST(ProbeCheck, RegexMatchesAnywhereInUtf8Mode) {
  const ProbeCheck c = check({{"kind", "regex"}, {"value", "\\bM[a-z]+\\b"}});
  EXPECT_TRUE(c.passes(", Max, who lived"));
  EXPECT_FALSE(c.passes(", max, who lived"));
  EXPECT_FALSE(c.passes("MAX"));
  // UTF mode: "." is one character, not one byte.
  const ProbeCheck u = check({{"kind", "regex"}, {"value", "^caf.$"}});
  EXPECT_TRUE(u.passes("caf\xc3\xa9"));
  // Invalid UTF-8 in the output is no error: it just never matches a character.
  EXPECT_FALSE(u.passes("caf\xff"));
  EXPECT_TRUE(c.passes("\xff Max"));
}

TEST(ProbeCheck, RegexIsBoundedAndRefusesWhatDoesNotCompile) {
  // Catastrophic backtracking: refused by the match limit in well under a second, never a hang.
  const ProbeCheck c = check({{"kind", "regex"}, {"value", "^(a+)+$"}});
  const auto t0 = std::chrono::steady_clock::now();
  const std::string e = test::error_of([&] { c.passes(std::string(64, 'a') + "!"); });
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(e.find("pack.json: /probes/0 (p): check.value: expected a regex match within PCRE2's bounds"),
            std::string::npos) << e;
  EXPECT_NE(e.find("limit"), std::string::npos) << e;
  EXPECT_LT(s, 2.0);
  // The same pattern on a subject it settles quickly is an ordinary verdict.
  EXPECT_TRUE(c.passes("aaaa"));
  EXPECT_NE(refusal({{"kind", "regex"}, {"value", "(unclosed"}}).find("check.value: expected a PCRE2 pattern that compiles"),
            std::string::npos);
  EXPECT_NE(refusal({{"kind", "regex"}, {"value", "a\\Cb"}}).find("expected a PCRE2 pattern that compiles"),
            std::string::npos);
}

TEST(ProbeCheck, NumericComparesTheFirstNumberWithinTolerance) {
  const ProbeCheck exact3 = check({{"kind", "numeric"}, {"value", "3"}});
  EXPECT_TRUE(exact3.passes(" He had 3 dogs and 5 cats."));
  EXPECT_FALSE(exact3.passes(" He had 5 dogs and 3 cats."));  // the first number counts
  EXPECT_FALSE(exact3.passes(" He had three dogs."));         // no number: a fail
  EXPECT_FALSE(exact3.passes(" 3.5"));
  const ProbeCheck near = check({{"kind", "numeric"}, {"value", "-2.45"}, {"tolerance", 0.1}});
  EXPECT_TRUE(near.passes("it was -2.5 degrees"));
  EXPECT_FALSE(near.passes("it was 2.5 degrees"));
  EXPECT_FALSE(near.passes("it was -2.6 degrees"));
  const ProbeCheck wide = check({{"kind", "numeric"}, {"value", "+10"}, {"tolerance", 2}});
  EXPECT_TRUE(wide.passes("12"));
  EXPECT_FALSE(wide.passes("13"));
}

TEST(ProbeCheck, FirstNumber) {
  double x = 0;
  ASSERT_TRUE(first_number("abc -12.5x", &x));
  EXPECT_EQ(x, -12.5);
  ASSERT_TRUE(first_number("v1.2.3", &x));
  EXPECT_EQ(x, 1.2);
  ASSERT_TRUE(first_number("a-b 7.", &x));
  EXPECT_EQ(x, 7.0);
  EXPECT_FALSE(first_number("no digits - + .", &x));
  // A digit run no double holds is skipped, not an error.
  ASSERT_TRUE(first_number(std::string(400, '9') + " then 4", &x));
  EXPECT_EQ(x, 4.0);
}

TEST(ProbeCheck, RefusesChecksThatAreNotData) {
  EXPECT_NE(refusal({{"kind", "python"}, {"value", "lambda s: True"}})
                .find("pack.json: /probes/0 (p): check.kind: expected exact, contains, regex or numeric, found \"python\""),
            std::string::npos);
  EXPECT_NE(refusal({{"kind", "contains"}, {"value", "x"}, {"code", "rm -rf /"}}).find("unknown field \"code\""),
            std::string::npos);
  EXPECT_NE(refusal({{"kind", "contains"}, {"value", "x"}, {"tolerance", 1}})
                .find("check.tolerance: expected a tolerance only with kind numeric"),
            std::string::npos);
  EXPECT_NE(refusal({{"kind", "numeric"}, {"value", "3"}, {"tolerance", -1}}).find("check.tolerance: expected a finite number >= 0"),
            std::string::npos);
  EXPECT_NE(refusal({{"kind", "numeric"}, {"value", "three"}}).find("check.value: expected a decimal number"),
            std::string::npos);
  EXPECT_NE(refusal({{"kind", "numeric"}, {"value", "1e3"}}).find("check.value: expected a decimal number"),
            std::string::npos);
  EXPECT_NE(refusal({{"kind", "exact"}, {"value", ""}}).find("check.value: expected 1..400 characters"), std::string::npos);
  EXPECT_NE(refusal({{"kind", "exact"}}).find("check.value: expected a string, found none"), std::string::npos);
  EXPECT_NE(refusal(json::array()).find("check: expected an object"), std::string::npos);
}

TEST(ProbeCheck, ReceiptFormRecordsTheToleranceOfNumericOnly) {
  EXPECT_EQ(check({{"kind", "numeric"}, {"value", "3"}}).to_json().dump(), R"({"kind":"numeric","value":"3","tolerance":0.0})");
  EXPECT_EQ(check({{"kind", "regex"}, {"value", "a+"}}).to_json().dump(), R"({"kind":"regex","value":"a+"})");
}

}  // namespace
}  // namespace ember::eval
