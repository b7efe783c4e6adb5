#pragma once
// UTF-8 helpers and the GPT-2 byte <-> printable-character mapping of byte-level BPE.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ember::tok {

// Length of the valid UTF-8 sequence starting at s[i] (strict: no overlongs, surrogates or
// code points above U+10FFFF), or 0 if s[i] does not start one.
size_t utf8_seq_len(std::string_view s, size_t i);
// Offset of the first byte that is not part of valid UTF-8, or npos if s is valid.
size_t utf8_invalid_offset(std::string_view s);
// True if s[i..] is a proper prefix of some valid UTF-8 sequence (could complete later).
bool utf8_incomplete_prefix(std::string_view s, size_t i);
void utf8_append(std::string& out, uint32_t cp);
// Decodes the valid sequence at s[i] of length n (from utf8_seq_len).
uint32_t utf8_decode(std::string_view s, size_t i, size_t n);

// GPT-2 bytes_to_unicode: bytes 33..126, 161..172, 174..255 map to themselves, the other
// 68 bytes to U+0100.. in byte order. Every byte-level vocabulary string is written in it.
struct ByteLevelMap {
  std::array<uint32_t, 256> byte_to_cp;
  std::array<std::string, 256> byte_to_utf8;
  std::array<int16_t, 256 + 68> cp_to_byte;  // -1 where no byte maps to the code point
  static const ByteLevelMap& get();
  // Maps a raw byte string to its byte-level form ("hi there" -> "hiĠthere").
  std::string encode(std::string_view raw) const;
  // Reverse: false if piece holds a character outside the 256 (then `out` is unspecified).
  bool decode(std::string_view piece, std::string& out) const;
  int byte_of(uint32_t cp) const;  // -1 if cp is not one of the 256 characters
};

}  // namespace ember::tok
