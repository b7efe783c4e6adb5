#include "perf/bench_flags.h"

#include <charconv>

#include "util/error.h"

namespace ember::perf {
namespace {

constexpr size_t kMaxCounts = 4096;  // a typo such as 1-1000000 should not run for a week
constexpr int kMaxCount = 1 << 24;   // the engine's position limit (kMaxCachePositions)

// A decimal count at the front of `s`, which is advanced past it; false when none is there or
// it is out of range.
bool take_count(std::string_view& s, int& out) {
  const char* end = s.data() + s.size();
  const auto [p, ec] = std::from_chars(s.data(), end, out);
  if (ec != std::errc() || p == s.data() || out < 0 || out > kMaxCount) return false;
  s.remove_prefix(size_t(p - s.data()));
  return true;
}

[[noreturn]] void bad_item(std::string_view flag, std::string_view item) {
  fail_field("bench", flag,
             "N, FIRST-LAST, FIRST-LAST+STEP or FIRST-LAST*FACTOR, comma-separated, counts 0.." +
                 std::to_string(kMaxCount),
             "'" + std::string(item) + "'");
}

}  // namespace

std::vector<int> parse_bench_counts(const std::string& text, std::string_view flag) {
  std::vector<int> out;
  std::string_view rest = text;
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    std::string_view s = item;
    int first = 0;
    if (!take_count(s, first)) bad_item(flag, item);
    int last = first, step = 1;
    char op = '+';
    if (!s.empty()) {
      if (s[0] != '-') bad_item(flag, item);
      s.remove_prefix(1);
      if (!take_count(s, last) || last < first) bad_item(flag, item);
      if (!s.empty()) {
        op = s[0];
        s.remove_prefix(1);
        if ((op != '+' && op != '*') || !take_count(s, step) || !s.empty() || step < (op == '+' ? 1 : 2))
          bad_item(flag, item);
      }
    }
    for (long long v = first; v <= last; v = op == '+' ? v + step : v * step) {
      if (out.size() == kMaxCounts)
        fail_field("bench", flag, "at most " + std::to_string(kMaxCounts) + " counts", "more in '" + text + "'");
      out.push_back(int(v));
      if (op == '*' && v == 0) break;  // 0*F stays 0
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return out;
}

std::pair<int, int> parse_bench_pg(const std::string& text) {
  std::string_view s = text;
  int pp = 0, tg = 0;
  const bool ok = take_count(s, pp) && !s.empty() && s[0] == ',' && (s.remove_prefix(1), take_count(s, tg)) &&
                  s.empty() && pp + tg > 0;
  if (!ok) fail_field("bench", "-pg", "PP,TG (prompt and generated tokens, not both 0)", "'" + text + "'");
  return {pp, tg};
}

}  // namespace ember::perf
