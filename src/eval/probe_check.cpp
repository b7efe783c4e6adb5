#include "eval/probe_check.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <charconv>
#include <cmath>

#include "util/error.h"
#include "util/json_strict.h"

namespace ember::eval {

namespace {

using nlohmann::json;

const char* kind_name(CheckKind k) {
  switch (k) {
    case CheckKind::exact: return "exact";
    case CheckKind::contains: return "contains";
    case CheckKind::regex: return "regex";
    case CheckKind::numeric: return "numeric";
  }
  return "?";
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// The number at text[i..] ([-+]?digits[.digits]); its length in *len, false if none there.
bool number_at(std::string_view text, size_t i, size_t* len) {
  size_t j = i;
  if (j < text.size() && (text[j] == '-' || text[j] == '+')) ++j;
  const size_t digits0 = j;
  while (j < text.size() && is_digit(text[j])) ++j;
  if (j == digits0) return false;
  if (j + 1 < text.size() && text[j] == '.' && is_digit(text[j + 1])) {
    ++j;
    while (j < text.size() && is_digit(text[j])) ++j;
  }
  *len = j - i;
  return true;
}

bool parse_double(std::string_view s, double* out) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size() && std::isfinite(*out);
}

}  // namespace

struct ProbeCheck::Regex {
  pcre2_code* code = nullptr;
  pcre2_match_context* ctx = nullptr;
  ~Regex() {
    pcre2_match_context_free(ctx);
    pcre2_code_free(code);
  }
};

bool first_number(std::string_view text, double* out) {
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (!is_digit(c) && !((c == '-' || c == '+') && i + 1 < text.size() && is_digit(text[i + 1]))) continue;
    size_t len = 0;
    if (!number_at(text, i, &len)) continue;
    if (parse_double(text.substr(i, len), out)) return true;
    i += len - 1;  // a digit run beyond a double's range: skip it whole
  }
  return false;
}

ProbeCheck ProbeCheck::from_json(const json& check, const std::string& where) {
  if (!check.is_object()) fail_field(where, "check", "an object {kind, value[, tolerance]}", check.type_name());
  for (const auto& [key, v] : check.items()) {
    (void)v;
    if (key != "kind" && key != "value" && key != "tolerance")
      fail_field(where, "check", "only the fields kind, value, tolerance", "unknown field \"" + key + "\"");
  }
  ProbeCheck c;
  c.where_ = where;
  const auto kind = check.find("kind");
  if (kind == check.end() || !kind->is_string())
    fail_field(where, "check.kind", "exact, contains, regex or numeric", kind == check.end() ? "none" : kind->dump());
  const std::string k = kind->get<std::string>();
  if (k == "exact") c.kind_ = CheckKind::exact;
  else if (k == "contains") c.kind_ = CheckKind::contains;
  else if (k == "regex") c.kind_ = CheckKind::regex;
  else if (k == "numeric") c.kind_ = CheckKind::numeric;
  else fail_field(where, "check.kind", "exact, contains, regex or numeric", "\"" + k + "\"");

  const auto value = check.find("value");
  if (value == check.end() || !value->is_string())
    fail_field(where, "check.value", "a string", value == check.end() ? "none" : value->type_name());
  c.value_ = value->get<std::string>();
  const size_t n = utf8_length(c.value_);
  if (n < 1 || n > 400) fail_field(where, "check.value", "1..400 characters", std::to_string(n));

  if (const auto tol = check.find("tolerance"); tol != check.end()) {
    if (c.kind_ != CheckKind::numeric)
      fail_field(where, "check.tolerance", "a tolerance only with kind numeric", "kind " + k);
    if (!tol->is_number() || !std::isfinite(tol->get<double>()) || tol->get<double>() < 0)
      fail_field(where, "check.tolerance", "a finite number >= 0", tol->dump());
    c.tolerance_ = tol->get<double>();
  }
  if (c.kind_ == CheckKind::numeric) {
    size_t len = 0;
    if (!number_at(c.value_, 0, &len) || len != c.value_.size() || !parse_double(c.value_, &c.number_))
      fail_field(where, "check.value", "a decimal number ([-+]digits[.digits])", "\"" + c.value_ + "\"");
  }
  if (c.kind_ == CheckKind::regex) {
    auto re = std::make_shared<Regex>();
    int err = 0;
    PCRE2_SIZE off = 0;
    // UTF mode, invalid UTF-8 in a subject never matches a character; \C (one code unit)
    // refused as it could split a character.
    re->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(c.value_.data()), c.value_.size(),
                             PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | PCRE2_NEVER_BACKSLASH_C, &err, &off, nullptr);
    if (!re->code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      fail_field(where, "check.value", "a PCRE2 pattern that compiles",
                 std::string(reinterpret_cast<const char*>(msg)) + " at offset " + std::to_string(off));
    }
    re->ctx = pcre2_match_context_create(nullptr);
    if (!re->ctx) fail(where, "out of memory creating a PCRE2 match context");
    pcre2_set_match_limit(re->ctx, kRegexMatchLimit);
    pcre2_set_depth_limit(re->ctx, kRegexDepthLimit);
    pcre2_set_heap_limit(re->ctx, kRegexHeapLimitKiB);
    c.regex_ = std::move(re);
  }
  return c;
}

bool ProbeCheck::passes(std::string_view output) const {
  switch (kind_) {
    case CheckKind::exact: return trim(output) == value_;
    case CheckKind::contains: return output.find(value_) != std::string_view::npos;
    case CheckKind::numeric: {
      double x = 0;
      return first_number(output, &x) && std::fabs(x - number_) <= tolerance_;
    }
    case CheckKind::regex: {
      pcre2_match_data* md = pcre2_match_data_create_from_pattern(regex_->code, nullptr);
      if (!md) fail(where_, "out of memory creating PCRE2 match data");
      const int rc = pcre2_match(regex_->code, reinterpret_cast<PCRE2_SPTR>(output.data()), output.size(), 0, 0,
                                 md, regex_->ctx);
      pcre2_match_data_free(md);
      if (rc >= 0) return true;
      if (rc == PCRE2_ERROR_NOMATCH) return false;
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      fail_field(where_, "check.value", "a regex match within PCRE2's bounds (match limit " +
                 std::to_string(kRegexMatchLimit) + ", depth " + std::to_string(kRegexDepthLimit) + ", heap " +
                 std::to_string(kRegexHeapLimitKiB) + " KiB)", reinterpret_cast<const char*>(msg));
    }
  }
  return false;
}

nlohmann::ordered_json ProbeCheck::to_json() const {
  nlohmann::ordered_json j;
  j["kind"] = kind_name(kind_);
  j["value"] = value_;
  if (kind_ == CheckKind::numeric) j["tolerance"] = tolerance_;
  return j;
}

}  // namespace ember::eval
