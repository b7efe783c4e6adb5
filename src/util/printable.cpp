#include "util/printable.h"

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace ember {
namespace {

// Length of the valid UTF-8 sequence at s[i] (1..4) and its code point, or 0 if invalid.
size_t utf8_at(std::string_view s, size_t i, uint32_t* cp) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  size_t n;
  uint32_t v;
  if (c < 0x80) {
    *cp = c;
    return 1;
  } else if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
    v = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    v = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    v = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xC0) != 0x80) return 0;
    v = (v << 6) | (b(k) & 0x3F);
  }
  // Overlong forms, surrogates and values past U+10FFFF are invalid.
  if ((n == 3 && v < 0x800) || (n == 4 && (v < 0x10000 || v > 0x10FFFF)) || (v >= 0xD800 && v <= 0xDFFF))
    return 0;
  *cp = v;
  return n;
}

bool escaped_code_point(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9F) || (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

}  // namespace

std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  char buf[16];
  size_t i = 0;
  while (i < s.size()) {
    uint32_t cp = 0;
    const size_t n = utf8_at(s, i, &cp);
    if (n == 0 || (n == 1 && (cp < 0x20 || cp == 0x7F))) {
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(s[i]));
      out += buf;
      ++i;
    } else if (escaped_code_point(cp)) {
      std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(cp));
      out += buf;
      i += n;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string printable_json(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', /*ensure_ascii=*/true, nlohmann::json::error_handler_t::replace);
}

std::string printable_json(const nlohmann::ordered_json& j, int indent) {
  return j.dump(indent, ' ', /*ensure_ascii=*/true, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace ember
