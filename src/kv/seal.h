#pragma once
// The seal: one content identity for every artifact manifest ember writes (native snapshots,
// mapped caches, and the KVC1 containers that carry them), and the trust checks built on it.
//
//   seal = hex SHA-256 of canonical_json(manifest without its "seal" and "signature" members)
//
// canonical_json is util/json_strict.h's: keys sorted, no whitespace, UTF-8 as is (the text
// Python's json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False) gives). The
// manifest names the SHA-256 of each payload, so the seal covers the payload bytes too: one
// 64-digit ID that changes when any field or any payload bit changes.
//
// Levels (docs/reliability.md): the seal in the manifest catches any edit that does not also
// recompute it (accidents, and naive edits such as a changed resume token or swapped payload
// files); `--expect ID` pins the ID a user recorded, catching every edit; a signature (Ed25519
// over "ember.artifact-seal.v1:" + seal) with `--trust KEY.pem` catches a forger who recomputes
// the seal, as long as the trusted key is not theirs.
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "util/ed25519.h"

namespace ember::kv {

inline constexpr const char* kSealKey = "seal";
inline constexpr const char* kSignatureKey = "signature";
inline constexpr const char* kSignatureAlgorithm = "ed25519";

// The seal of a manifest object (any members named seal/signature are left out).
std::string manifest_seal(const nlohmann::json& manifest);

// The bytes a signature covers: a domain prefix, so a signature made for a seal can never be
// replayed as a signature over some other ember message.
std::string seal_signing_message(const std::string& seal);

// What a user asks of an artifact on the command line (replay, compare, import, map replay).
struct TrustRequirements {
  std::string expect_seal;        // --expect ID: the seal must equal it
  std::string trusted_key_pem;    // --trust PUBKEY.pem: a valid signature by this key is required
};

// Throws Error naming `where` and the field on the first requirement the artifact fails:
// "seal: expected <ID> (--expect), found <seal>"; "signature: expected a signature by the
// trusted key ..., found none / another key / an invalid signature".
void check_trust(const std::string& where, const std::string& seal,
                 const std::optional<Ed25519Signature>& signature, const TrustRequirements& req);

// The JSON form of a signature inside a manifest, and its strict reader (unknown, missing and
// malformed members refused, naming `where`).
nlohmann::ordered_json signature_to_json(const Ed25519Signature& s);
Ed25519Signature signature_from_json(const nlohmann::json& j, const std::string& where);

}  // namespace ember::kv
