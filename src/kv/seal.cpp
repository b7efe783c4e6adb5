#include "kv/seal.h"

#include "kv/strict_json.h"
#include "util/error.h"
#include "util/hex.h"
#include "util/json_strict.h"
#include "util/sha256.h"

namespace ember::kv {

std::string manifest_seal(const nlohmann::json& manifest) {
  EMBER_CHECK(manifest.is_object());
  nlohmann::json body = manifest;
  body.erase(kSealKey);
  body.erase(kSignatureKey);
  const std::string text = ember::canonical_json(body);
  return sha256_hex(text.data(), text.size());
}

std::string seal_signing_message(const std::string& seal) { return "ember.artifact-seal.v1:" + seal; }

void check_trust(const std::string& where, const std::string& seal,
                 const std::optional<Ed25519Signature>& signature, const TrustRequirements& req) {
  if (!req.expect_seal.empty() && req.expect_seal != seal)
    fail_field(where, "seal", req.expect_seal + " (--expect)", seal);
  if (req.trusted_key_pem.empty()) return;
  const std::string trusted = ed25519_public_key(req.trusted_key_pem);
  const std::string want = "a signature by the key in " + req.trusted_key_pem + " (--trust)";
  if (!signature) fail_field(where, "signature", want, "an unsigned artifact");
  if (signature->public_key != trusted)
    fail_field(where, "signature.public_key", trusted + " (" + req.trusted_key_pem + ")", signature->public_key);
  if (!ed25519_verify(*signature, seal_signing_message(seal)))
    fail_field(where, "signature.value", "a valid Ed25519 signature of the seal", "an invalid signature");
}

nlohmann::ordered_json signature_to_json(const Ed25519Signature& s) {
  return {{"algorithm", kSignatureAlgorithm}, {"public_key", s.public_key}, {"value", s.value}};
}

Ed25519Signature signature_from_json(const nlohmann::json& j, const std::string& where) {
  StrictObject o(j, kSignatureKey, where);
  const std::string algorithm = o.string("algorithm", 32);
  if (algorithm != kSignatureAlgorithm)
    fail_field(where, "signature.algorithm", kSignatureAlgorithm, "'" + algorithm + "'");
  Ed25519Signature s;
  s.public_key = o.string("public_key", 64);
  s.value = o.string("value", 128);
  o.done();
  if (!is_hex(s.public_key, 64))
    fail_field(where, "signature.public_key", "64 lowercase hex digits", "'" + s.public_key + "'");
  if (!is_hex(s.value, 128)) fail_field(where, "signature.value", "128 lowercase hex digits", "'" + s.value + "'");
  return s;
}

}  // namespace ember::kv
