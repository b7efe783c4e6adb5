#include "tokenizer/utf8.h"

namespace ember::tok {

size_t utf8_seq_len(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t c = b(i);
  if (c < 0x80) return 1;
  size_t n;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;  // overlong
    if (c == 0xED) hi = 0x9F;  // surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;  // overlong
    if (c == 0xF4) hi = 0x8F;  // > U+10FFFF
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if ((b(i + k) & 0xC0) != 0x80) return 0;
  return n;
}

size_t utf8_invalid_offset(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t n = utf8_seq_len(s, i);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

namespace {
// Expected length of a sequence led by c and the allowed range of its second byte;
// n == 0 if c can never lead one.
struct Lead {
  size_t n;
  uint8_t lo, hi;
};
Lead lead_of(uint8_t c) {
  if (c < 0x80) return {1, 0, 0};
  if (c >= 0xC2 && c <= 0xDF) return {2, 0x80, 0xBF};
  if (c >= 0xE0 && c <= 0xEF) return {3, uint8_t(c == 0xE0 ? 0xA0 : 0x80), uint8_t(c == 0xED ? 0x9F : 0xBF)};
  if (c >= 0xF0 && c <= 0xF4) return {4, uint8_t(c == 0xF0 ? 0x90 : 0x80), uint8_t(c == 0xF4 ? 0x8F : 0xBF)};
  return {0, 0, 0};
}
}  // namespace

bool utf8_incomplete_prefix(std::string_view s, size_t i) {
  const size_t have = s.size() - i;
  const Lead l = lead_of(static_cast<uint8_t>(s[i]));
  if (l.n <= 1 || have >= l.n) return false;
  for (size_t k = 1; k < have; ++k) {
    const uint8_t c = static_cast<uint8_t>(s[i + k]);
    if (k == 1 ? (c < l.lo || c > l.hi) : ((c & 0xC0) != 0x80)) return false;
  }
  return true;
}

void utf8_append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

uint32_t utf8_decode(std::string_view s, size_t i, size_t n) {
  const auto b = [&](size_t k) { return static_cast<uint32_t>(static_cast<uint8_t>(s[i + k])); };
  switch (n) {
    case 1: return b(0);
    case 2: return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    case 3: return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    default:
      return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  }
}

const ByteLevelMap& ByteLevelMap::get() {
  static const ByteLevelMap map = [] {
    ByteLevelMap m;
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
      m.byte_to_cp[b] = printable ? b : next++;
      utf8_append(m.byte_to_utf8[b], m.byte_to_cp[b]);
    }
    m.cp_to_byte.fill(-1);
    for (int b = 0; b < 256; ++b) m.cp_to_byte[m.byte_to_cp[b]] = static_cast<int16_t>(b);
    return m;
  }();
  return map;
}

std::string ByteLevelMap::encode(std::string_view raw) const {
  std::string out;
  out.reserve(raw.size() * 2);
  for (char c : raw) out += byte_to_utf8[static_cast<uint8_t>(c)];
  return out;
}

int ByteLevelMap::byte_of(uint32_t cp) const {
  return cp < cp_to_byte.size() ? cp_to_byte[cp] : -1;
}

bool ByteLevelMap::decode(std::string_view piece, std::string& out) const {
  size_t i = 0;
  while (i < piece.size()) {
    const size_t n = utf8_seq_len(piece, i);
    if (n == 0) return false;
    const int b = byte_of(utf8_decode(piece, i, n));
    if (b < 0) return false;
    out.push_back(static_cast<char>(b));
    i += n;
  }
  return true;
}

}  // namespace ember::tok
