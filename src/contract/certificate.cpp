#include "contract/certificate.h"

#include "contract/json_schema.h"
#include "kv/seal.h"
#include "util/ed25519.h"

namespace ember::contract {

using nlohmann::json;

std::vector<std::string> certificate_consistency(const json& doc) {
  std::vector<std::string> out;
  if (!doc.is_object() || !doc.contains("format") || doc["format"] != "ember.kv-quant-certificate.v1" ||
      !builtin_schema("kv-quant-certificate").validate(doc).empty())
    return out;
  const std::string seal = kv::manifest_seal(doc);
  if (doc["seal"] != seal)
    out.push_back("/seal: expected the SHA-256 of the certificate without seal and signature, " + seal +
                  ", found " + doc["seal"].dump());
  if (doc.contains("signature")) {
    const json& s = doc["signature"];
    const Ed25519Signature sig{s["public_key"].get<std::string>(), s["value"].get<std::string>()};
    if (!ed25519_verify(sig, kv::seal_signing_message(doc["seal"].get<std::string>())))
      out.push_back("/signature/value: expected a valid Ed25519 signature of the seal by " + sig.public_key +
                    ", found an invalid signature");
  }
  const json& b = doc["budget"];
  const json& h = doc["measured"]["held_out"];
  if (h["kl_mean"].get<double>() > b["kl_mean_max"].get<double>())
    out.push_back("/measured/held_out/kl_mean: expected at most the budget's " + b["kl_mean_max"].dump() +
                  ", found " + h["kl_mean"].dump());
  if (b.contains("top1_min") && h["top1_agreement"].get<double>() < b["top1_min"].get<double>())
    out.push_back("/measured/held_out/top1_agreement: expected at least the budget's " + b["top1_min"].dump() +
                  ", found " + h["top1_agreement"].dump());
  if (doc["choice"]["layers"].size() != doc["model"]["layers"].get<size_t>())
    out.push_back("/choice/layers: expected one entry per model layer (" + doc["model"]["layers"].dump() +
                  "), found " + std::to_string(doc["choice"]["layers"].size()));
  return out;
}

}  // namespace ember::contract
