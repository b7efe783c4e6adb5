#include "cli/trust_flags.h"

#include <cstdio>

namespace ember::cli {

void add_trust_flags(CLI::App* c, kv::TrustRequirements& req) {
  c->add_option("--expect", req.expect_seal, "refuse the artifact unless its seal is ID (as printed by its writer)");
  c->add_option("--trust", req.trusted_key_pem, "refuse the artifact unless it is signed by this Ed25519 public key (PEM)");
}

void add_two_sided_trust_flags(CLI::App* c, TwoSidedTrust& t) {
  c->add_option("--expect-left", t.left.expect_seal, "refuse LEFT unless its seal is ID");
  c->add_option("--expect-right", t.right.expect_seal, "refuse RIGHT unless its seal is ID");
  c->add_option("--trust-left", t.left.trusted_key_pem, "refuse LEFT unless signed by this Ed25519 public key (PEM)");
  c->add_option("--trust-right", t.right.trusted_key_pem, "refuse RIGHT unless signed by this Ed25519 public key (PEM)");
  c->add_option("--trust", t.both_key_pem, "refuse either side unless signed by this Ed25519 public key (PEM)")
      ->excludes(c->get_option("--trust-left"))
      ->excludes(c->get_option("--trust-right"));
}

kv::TrustRequirements TwoSidedTrust::side(bool left_side) const {
  kv::TrustRequirements r = left_side ? left : right;
  if (!both_key_pem.empty()) r.trusted_key_pem = both_key_pem;
  return r;
}

void add_sign_flag(CLI::App* c, std::string& private_key_pem) {
  c->add_option("--sign", private_key_pem, "sign the artifact's seal with this Ed25519 private key (PEM)");
}

void check_artifact_trust(const std::string& where, const kv::SnapshotManifest& m, const kv::TrustRequirements& req) {
  kv::check_trust(where, m.seal, m.signature, req);
}

void print_seal(const kv::SnapshotManifest& m) {
  std::printf("seal %s\n", m.seal.c_str());
  if (m.signature) std::printf("signed by %s\n", m.signature->public_key.c_str());
}

void add_model_check_flags(CLI::App* c, int& positions, bool& skip) {
  c->add_option("--check-positions", positions,
                "positions the model check recomputes and compares with the file's rows (default " +
                    std::to_string(positions) + "; the last always among them)")
      ->check(CLI::Range(1, 1 << 24));
  c->add_flag("--no-model-check", skip,
              "do not check that the model computes the file's rows (the manifest's producer says so)");
}

}  // namespace ember::cli
