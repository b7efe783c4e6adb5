#pragma once
// The checks `ember pack eval` applies to a probe's output (schemas/domcap1.schema.json,
// $defs/check): data, never code. A check is compiled once, before any model runs, so a bad
// check is refused before the evaluation costs anything.
//   exact     the output, leading and trailing ASCII whitespace removed, equals value
//   contains  value occurs in the output (bytes, case-sensitive)
//   regex     the PCRE2 pattern value (UTF mode) matches somewhere in the output; the match is
//             bounded (match, depth and heap limits below), and a match that reaches a limit
//             is an Error naming the check, never a hang
//   numeric   the first number in the output ([-+]?digits[.digits]) is within tolerance
//             (default 0) of value; no number is a fail
// docs/contracts.md ("Running a pack's probes").
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace ember::eval {

enum class CheckKind { exact, contains, regex, numeric };

// PCRE2 bounds of a regex check's match (pcre2_set_match_limit / depth_limit / heap_limit).
inline constexpr uint32_t kRegexMatchLimit = 1'000'000;
inline constexpr uint32_t kRegexDepthLimit = 10'000;
inline constexpr uint32_t kRegexHeapLimitKiB = 16 * 1024;

class ProbeCheck {
 public:
  // From a check object {kind, value[, tolerance]}. Error naming `where` and the field: an
  // unknown field or kind, an empty or overlong value, a tolerance on a kind other than
  // numeric, a negative or non-finite tolerance, a numeric value that is not a number, a
  // regex that does not compile.
  static ProbeCheck from_json(const nlohmann::json& check, const std::string& where);

  // Whether `output` passes. Error naming the check when a regex match reaches a limit.
  bool passes(std::string_view output) const;

  CheckKind kind() const { return kind_; }
  const std::string& value() const { return value_; }
  // The check as a receipt records it: {kind, value} and, for numeric, tolerance.
  nlohmann::ordered_json to_json() const;

 private:
  struct Regex;
  CheckKind kind_ = CheckKind::contains;
  std::string value_, where_;
  double number_ = 0, tolerance_ = 0;
  std::shared_ptr<const Regex> regex_;
};

// The first number in `text` ([-+]?[0-9]+(\.[0-9]+)?, the sign only when it directly precedes
// the digits), or false when there is none. Digit runs too long for a double are skipped.
bool first_number(std::string_view text, double* out);

}  // namespace ember::eval
