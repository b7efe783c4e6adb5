// kv::parse_json_strict, the parser under every snapshot manifest: linear time, bounded DOM,
// and the same depth and duplicate-key rules as before it was rebuilt on SAX events.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>

#include "support/test_support.h"
#include "kv/state.h"
#include "kv/strict_json.h"
#include "util/error.h"

namespace ember::kv {
namespace {

using test::error_of;

// Regression (found reviewing the manifest fuzz target): nlohmann's callback parser scans
// the whole parent container after each closed object, so `[{}, {}, ...]` with n objects took
// ~n^2/2 steps: a 64 MiB manifest.json kept `ember kv verify` busy for more than 10 minutes
// (killed). The old parse alone, g++ -O2: 10k objects 0.056 s, 20k 0.22 s, 40k 1.1 s (x4 per
// doubling), so the 300k here would take about a minute; now each object is read once.
TEST(StrictJson, ManyClosedObjectsParseInLinearTime) {
  const size_t n = 300000;
  std::string text = "[";
  for (size_t i = 0; i < n; ++i) text += i ? ",{}" : "{}";
  text += "]";
  const auto t0 = std::chrono::steady_clock::now();
  const nlohmann::json j = parse_json_strict(text, "t");
  // The manifest reader refuses the same text, after the same parse, as a non-object.
  const std::string e = error_of([&] { SnapshotManifest::from_json(text, "m.json"); });
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(j.is_array());
  EXPECT_EQ(j.size(), n);
  EXPECT_TRUE(j[n - 1].is_object());
  EXPECT_NE(e.find("m.json: top level: expected an object, found array"), std::string::npos) << e;
  // Linear: well under a second in Release, a few under ASan; quadratic: minutes to hours.
  EXPECT_LT(s, 20.0);
}

TEST(StrictJson, ValueCountIsBoundedWhileParsing) {
  EXPECT_NO_THROW(parse_json_strict("[1, 2, 3]", "t", 16, 4));  // the array is a value too
  EXPECT_NE(error_of([] { parse_json_strict("[1, 2, 3, 4]", "t", 16, 4); })
                .find("t: JSON: expected at most 4 values"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_json_strict(R"({"a": {"b": [], "c": ""}})", "t", 16, 3); })
                .find("at most 3 values"),
            std::string::npos);
  // A manifest may hold kMaxPositions prefix ids and little else: one more value than the
  // limit is refused before the DOM (16+ bytes per value) grows further.
  std::string big = "[0";
  big.reserve(2 * kMaxManifestValues + 2);
  for (size_t i = 0; i < kMaxManifestValues; ++i) big += ",0";
  big += "]";
  const std::string e = error_of([&] { SnapshotManifest::from_json(big, "m.json"); });
  EXPECT_NE(e.find("m.json: JSON: expected at most " + std::to_string(kMaxManifestValues) + " values"),
            std::string::npos)
      << e;
}

TEST(StrictJson, DepthLimitCountsEnclosingContainers) {
  // 16 containers around the innermost value is the limit (the top level is depth 0).
  const auto nested = [](int n, const std::string& inner) {
    return std::string(size_t(n), '[') + inner + std::string(size_t(n), ']');
  };
  EXPECT_NO_THROW(parse_json_strict(nested(17, ""), "t"));  // innermost array at depth 16
  EXPECT_NO_THROW(parse_json_strict(nested(16, "1"), "t"));
  EXPECT_NE(error_of([&] { parse_json_strict(nested(17, "1"), "t"); })
                .find("t: JSON nesting: expected depth <= 16, found depth 17"),
            std::string::npos);
  EXPECT_NE(error_of([&] { parse_json_strict(nested(18, ""), "t"); }).find("found depth 17"),
            std::string::npos);
  std::string obj;
  for (int i = 0; i < 17; ++i) obj += "{\"k\":";
  obj += "1" + std::string(17, '}');
  EXPECT_NE(error_of([&] { parse_json_strict(obj, "t"); }).find("JSON nesting"), std::string::npos);
}

TEST(StrictJson, DuplicatePathSkipsArrayLevelsAndMalformedIsNamed) {
  EXPECT_NE(error_of([] { parse_json_strict(R"({"a": [{"x": 1}, {"b": {"x": 1, "x": 2}}]})", "t"); })
                .find("t: a.b.x: expected a key that appears once, found a duplicated key"),
            std::string::npos);
  for (const char* bad : {"", "{", "{} x", "{\"a\": 1,}", "[1 2]", "{\"a\":\"\xff\"}", "nul", "1e999"})
    EXPECT_NE(error_of([&] { parse_json_strict(bad, "t"); }).find("t: JSON: expected well-formed JSON"),
              std::string::npos)
        << bad;
  const nlohmann::json j = parse_json_strict(R"({"b": [1, -2, 3.5, "s", null, true, {"c": []}], "a": 18446744073709551615})", "t");
  EXPECT_EQ(j.dump(), R"({"a":18446744073709551615,"b":[1,-2,3.5,"s",null,true,{"c":[]}]})");
}

}  // namespace
}  // namespace ember::kv
