#pragma once
// What the schema cannot say about a schema-valid KV-quantization certificate
// (ember.kv-quant-certificate.v1, analysis/kv_quant_budget.h), one "<pointer>: expected ...,
// found ..." line each:
// - /seal: the SHA-256 of the canonical JSON without seal and signature (kv::manifest_seal),
//   so any edit that does not recompute it is caught;
// - /signature: when present, a valid Ed25519 signature of that seal by the key it names
//   (a forger who recomputes the seal must drop or replace it; pin the signer to catch that);
// - /measured/held_out: meets /budget (what the certificate claims);
// - /choice/layers: one entry per model layer.
// Empty for any other document and for a schema-invalid certificate.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ember::contract {

std::vector<std::string> certificate_consistency(const nlohmann::json& doc);

}  // namespace ember::contract
