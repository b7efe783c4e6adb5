#pragma once
// Ed25519 signatures through OpenSSL (EVP_PKEY_ED25519), for artifacts whose producer must be
// proven, not only their integrity. A content hash (a seal) catches accidental edits and any
// edit when the user pins the hash they recorded; against a forger who rewrites the seal too,
// only a signature by a key the reader trusts helps. docs/reliability.md says which level
// protects against what.
//
// Keys are PEM files as `openssl genpkey -algorithm ed25519` (PKCS#8 private key) and
// `openssl pkey -pubout` (SubjectPublicKeyInfo) write them. Signatures are 64 bytes, public keys
// 32 bytes, both carried as lowercase hex.
#include <string>

namespace ember {

struct Ed25519Signature {
  std::string public_key;  // 64 hex digits: the signer's raw public key
  std::string value;       // 128 hex digits: the signature
};

// Signs `message` with the private key in `private_key_pem_path`. Throws Error naming the file
// when it is not an Ed25519 private key.
Ed25519Signature ed25519_sign(const std::string& private_key_pem_path, const std::string& message);

// The raw public key (64 hex digits) in a PEM public-key file; Error naming the file otherwise.
std::string ed25519_public_key(const std::string& public_key_pem_path);

// Writes a new key pair: the private key (PKCS#8 PEM, mode 0600) and its public key
// (SubjectPublicKeyInfo PEM), each atomically; refuses existing files unless force.
void ed25519_generate(const std::string& private_key_pem_path, const std::string& public_key_pem_path, bool force);

// True when `signature.value` is a valid signature of `message` by `signature.public_key`.
// Malformed hex is simply not valid (false); nothing throws for a bad signature.
bool ed25519_verify(const Ed25519Signature& signature, const std::string& message);

}  // namespace ember
