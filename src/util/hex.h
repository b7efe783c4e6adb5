#pragma once
// Lowercase hexadecimal identifiers (SHA-256 digests, seals, store namespaces, public keys):
// one definition, so every reader accepts and refuses the same spellings.
#include <cstddef>
#include <string_view>

namespace ember {

// True when `s` is exactly `n` lowercase hex digits (uppercase is refused: ember writes every
// digest lowercase, so another spelling is another key).
inline bool is_hex(std::string_view s, size_t n) {
  if (s.size() != n) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace ember
