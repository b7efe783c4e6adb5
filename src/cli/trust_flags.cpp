#include "cli/trust_flags.h"

#include <cstdio>

namespace ember::cli {

void add_trust_flags(CLI::App* c, kv::TrustRequirements& req) {
  c->add_option("--expect", req.expect_seal, "refuse the artifact unless its seal is ID (as printed by its writer)");
  c->add_option("--trust", req.trusted_key_pem, "refuse the artifact unless it is signed by this Ed25519 public key (PEM)");
}

void add_sign_flag(CLI::App* c, std::string& private_key_pem) {
  c->add_option("--sign", private_key_pem, "sign the artifact's seal with this Ed25519 private key (PEM)");
}

void check_artifact_trust(const std::string& where, const kv::SnapshotManifest& m, const kv::TrustRequirements& req) {
  kv::check_trust(where, m.seal, m.signature, req);
}

void print_seal(const kv::SnapshotManifest& m, const kv::MappedProvenance* mapping) {
  std::printf("seal %s\n", kv::state_seal(m, mapping).c_str());
  if (m.signature) std::printf("signed by %s\n", m.signature->public_key.c_str());
}

}  // namespace ember::cli
