#pragma once
// SHA-256 (OpenSSL EVP). Identities, payload hashes and receipts all use it.
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace ember {

using Digest = std::array<uint8_t, 32>;

// Streaming hasher: update() any number of times, then finish() once.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, size_t n);
  void update(std::string_view s) { update(s.data(), s.size()); }
  // Length-prefixed field (u64 little-endian length, then bytes): hashing a sequence of
  // fields this way can never alias two different sequences.
  void update_field(std::string_view s);
  void update_u64(uint64_t v);
  Digest finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Bytes passed to every Sha256 of this process so far (all threads). Lets tests assert how
// many times a path hashes a payload (a verified state is hashed once, when it is read).
uint64_t sha256_bytes_hashed();

std::string to_hex(const uint8_t* data, size_t n);
inline std::string to_hex(const Digest& d) { return to_hex(d.data(), d.size()); }
std::string sha256_hex(const void* data, size_t n);
inline std::string sha256_hex(std::string_view s) { return sha256_hex(s.data(), s.size()); }
// Hash of a whole file, streamed. Throws Error naming the path on I/O failure.
std::string sha256_file_hex(const std::string& path);

}  // namespace ember
