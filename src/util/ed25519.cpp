#include "util/ed25519.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include "util/atomic_file.h"
#include "util/error.h"
#include "util/sha256.h"

namespace ember {
namespace {

struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;

// Key files are small; read_file refuses FIFOs, devices and anything over 64 KiB.
Pkey load_pem(const std::string& path, bool private_key) {
  const std::string pem = read_file(path, size_t(64) << 10);
  std::unique_ptr<BIO, BioFree> bio(BIO_new_mem_buf(pem.data(), int(pem.size())));
  if (!bio) fail(path, "cannot read the key (out of memory)");
  Pkey key(private_key ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr)
                       : PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr));
  const char* what = private_key ? "an Ed25519 private key in PEM (openssl genpkey -algorithm ed25519)"
                                 : "an Ed25519 public key in PEM (openssl pkey -pubout)";
  if (!key) fail_field(path, "key", what, "no such PEM key");
  if (EVP_PKEY_get_base_id(key.get()) != EVP_PKEY_ED25519) fail_field(path, "key", what, "a key of another type");
  return key;
}

std::string raw_public_hex(EVP_PKEY* key) {
  uint8_t raw[32];
  size_t n = sizeof raw;
  if (EVP_PKEY_get_raw_public_key(key, raw, &n) != 1 || n != 32) fail("ed25519", "cannot extract the public key");
  return to_hex(raw, n);
}

bool from_hex(const std::string& hex, std::vector<uint8_t>& out) {
  if (hex.size() % 2) return false;
  out.clear();
  for (size_t i = 0; i < hex.size(); i += 2) {
    int v = 0;
    for (size_t j = i; j < i + 2; ++j) {
      const char c = hex[j];
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (d < 0) return false;
      v = v * 16 + d;
    }
    out.push_back(uint8_t(v));
  }
  return true;
}

}  // namespace

Ed25519Signature ed25519_sign(const std::string& private_key_pem_path, const std::string& message) {
  const Pkey key = load_pem(private_key_pem_path, true);
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  uint8_t sig[64];
  size_t n = sizeof sig;
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1 ||
      EVP_DigestSign(ctx.get(), sig, &n, reinterpret_cast<const uint8_t*>(message.data()), message.size()) != 1 ||
      n != 64)
    fail(private_key_pem_path, "Ed25519 signing failed");
  return Ed25519Signature{raw_public_hex(key.get()), to_hex(sig, n)};
}

std::string ed25519_public_key(const std::string& public_key_pem_path) {
  const Pkey key = load_pem(public_key_pem_path, false);
  return raw_public_hex(key.get());
}

void ed25519_generate(const std::string& private_key_pem_path, const std::string& public_key_pem_path, bool force) {
  EVP_PKEY* raw = nullptr;
  std::unique_ptr<EVP_PKEY_CTX, void (*)(EVP_PKEY_CTX*)> ctx(EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nullptr),
                                                               EVP_PKEY_CTX_free);
  if (!ctx || EVP_PKEY_keygen_init(ctx.get()) != 1 || EVP_PKEY_keygen(ctx.get(), &raw) != 1)
    fail(private_key_pem_path, "Ed25519 key generation failed");
  const Pkey key(raw);
  auto pem_of = [&](bool private_key) {
    std::unique_ptr<BIO, BioFree> bio(BIO_new(BIO_s_mem()));
    const int ok = bio ? (private_key ? PEM_write_bio_PrivateKey(bio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr)
                                      : PEM_write_bio_PUBKEY(bio.get(), key.get()))
                       : 0;
    char* data = nullptr;
    const long n = ok == 1 ? BIO_get_mem_data(bio.get(), &data) : 0;
    if (n <= 0) fail(private_key ? private_key_pem_path : public_key_pem_path, "cannot encode the key as PEM");
    return std::string(data, size_t(n));
  };
  {
    AtomicFile f(private_key_pem_path, force);
    if (::chmod(f.temp_path().c_str(), 0600) != 0) fail(private_key_pem_path, "cannot restrict the key file to mode 0600");
    f.sink().write(pem_of(true));
    f.commit();
  }
  write_file_atomic(public_key_pem_path, pem_of(false), force);
}

bool ed25519_verify(const Ed25519Signature& signature, const std::string& message) {
  std::vector<uint8_t> pub, sig;
  if (!from_hex(signature.public_key, pub) || pub.size() != 32) return false;
  if (!from_hex(signature.value, sig) || sig.size() != 64) return false;
  Pkey key(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, pub.data(), pub.size()));
  if (!key) return false;
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  return ctx && EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) == 1 &&
         EVP_DigestVerify(ctx.get(), sig.data(), sig.size(), reinterpret_cast<const uint8_t*>(message.data()),
                          message.size()) == 1;
}

}  // namespace ember
