#include "util/sha256.h"

#include <openssl/evp.h>

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

#include "util/error.h"
#include "util/open_file.h"

namespace ember {

struct Sha256::Impl {
  EVP_MD_CTX* ctx = nullptr;
};

Sha256::Sha256() : impl_(std::make_unique<Impl>()) {
  impl_->ctx = EVP_MD_CTX_new();
  EMBER_CHECK(impl_->ctx != nullptr);
  EMBER_CHECK(EVP_DigestInit_ex(impl_->ctx, EVP_sha256(), nullptr) == 1);
}

Sha256::~Sha256() { EVP_MD_CTX_free(impl_->ctx); }

namespace {
std::atomic<uint64_t> g_bytes_hashed{0};
}  // namespace

uint64_t sha256_bytes_hashed() { return g_bytes_hashed.load(std::memory_order_relaxed); }

void Sha256::update(const void* data, size_t n) {
  g_bytes_hashed.fetch_add(n, std::memory_order_relaxed);
  if (n) EMBER_CHECK(EVP_DigestUpdate(impl_->ctx, data, n) == 1);
}

void Sha256::update_u64(uint64_t v) {
  uint8_t b[8];
  for (int i = 0; i < 8; ++i) b[i] = uint8_t(v >> (8 * i));
  update(b, 8);
}

void Sha256::update_field(std::string_view s) {
  update_u64(s.size());
  update(s);
}

Digest Sha256::finish() {
  Digest d{};
  unsigned int len = 0;
  EMBER_CHECK(EVP_DigestFinal_ex(impl_->ctx, d.data(), &len) == 1 && len == 32);
  return d;
}

std::string to_hex(const uint8_t* data, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    s[2 * i] = digits[data[i] >> 4];
    s[2 * i + 1] = digits[data[i] & 15];
  }
  return s;
}

std::string sha256_hex(const void* data, size_t n) {
  Sha256 h;
  h.update(data, n);
  return to_hex(h.finish());
}

std::string sha256_file_hex(const std::string& path) {
  uint64_t size = 0;
  const int fd = open_regular_file(path, &size);  // refuses FIFOs and devices without blocking
  Sha256 h;
  std::vector<char> buf(1 << 20);
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      fail(path, std::string("read error: ") + std::strerror(errno));
    }
    if (n == 0) break;
    h.update(buf.data(), size_t(n));
  }
  ::close(fd);
  return to_hex(h.finish());
}

}  // namespace ember
