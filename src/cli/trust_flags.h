#pragma once
// The trust flags, the same on every command that reads or writes a sealed artifact:
//   --expect ID        the artifact's seal must be ID (the one its writer printed)
//   --trust KEY.pem    the artifact must carry a valid Ed25519 signature by this public key
//   --sign KEY.pem     sign what is written with this private key
// What each level protects against: docs/reliability.md ("Seals and signatures").
#include <string>

#include <CLI/CLI.hpp>

#include "kv/seal.h"
#include "kv/state.h"

namespace ember::cli {

void add_trust_flags(CLI::App* c, kv::TrustRequirements& req);
void add_sign_flag(CLI::App* c, std::string& private_key_pem);

// The same pair for a command that reads two artifacts (kv compare): --expect-left,
// --expect-right, --trust-left, --trust-right, and --trust for both sides.
struct TwoSidedTrust {
  kv::TrustRequirements left, right;
  std::string both_key_pem;
  kv::TrustRequirements side(bool left_side) const;  // with --trust folded in
};
void add_two_sided_trust_flags(CLI::App* c, TwoSidedTrust& t);

// The model check every foreign import runs (kv/foreign_check.h, docs/formats/llamacpp-state.md):
//   --check-positions K   positions recomputed and compared (default 4; the last always)
//   --no-model-check      compare nothing (recorded in the manifest's producer)
void add_model_check_flags(CLI::App* c, int& positions, bool& skip);

// kv::check_trust over a manifest as read (its seal and signature). Error naming `where`.
void check_artifact_trust(const std::string& where, const kv::SnapshotManifest& m, const kv::TrustRequirements& req);

// "seal <ID>" and, when signed, "signed by <public key>": what a user records to pin later.
void print_seal(const kv::SnapshotManifest& m);

}  // namespace ember::cli
