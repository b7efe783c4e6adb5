// The seal (kv/seal.h): one ID over the canonical manifest, and the trust checks on it.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "kv/seal.h"
#include "support/test_support.h"
#include "util/error.h"
#include "util/sha256.h"

namespace ember::kv {
namespace {

using test::error_of;

TEST(Seal, CoversEveryMemberButItselfAndTheSignatureIndependentOfOrderAndSpacing) {
  const auto a = nlohmann::json::parse(R"({"b": 1, "a": {"y": [1, 2], "x": "s"}})");
  const auto b = nlohmann::json::parse(R"({"a":{"x":"s","y":[1,2]},"b":1,"seal":"00","signature":{}})");
  EXPECT_EQ(manifest_seal(a), manifest_seal(b));
  // The definition, spelled out: SHA-256 of the sorted, compact text.
  const std::string text = R"({"a":{"x":"s","y":[1,2]},"b":1})";
  EXPECT_EQ(manifest_seal(a), sha256_hex(text.data(), text.size()));
  auto c = a;
  c["b"] = 2;
  EXPECT_NE(manifest_seal(a), manifest_seal(c));
  auto d = a;
  d["mapping"] = nlohmann::json::object();  // an extension member is covered too
  EXPECT_NE(manifest_seal(a), manifest_seal(d));
}

TEST(Seal, TrustRequirementsRefuseByName) {
  const std::string dir = test::temp_dir("trust");
  ed25519_generate(dir + "/k.pem", dir + "/k.pub", false);
  ed25519_generate(dir + "/o.pem", dir + "/o.pub", false);
  const std::string seal(64, 'a'), other(64, 'b');
  const Ed25519Signature sig = ed25519_sign(dir + "/k.pem", seal_signing_message(seal));
  EXPECT_NO_THROW(check_trust("s", seal, std::nullopt, {}));
  EXPECT_NO_THROW(check_trust("s", seal, sig, {seal, dir + "/k.pub"}));
  EXPECT_EQ(error_of([&] { check_trust("s", seal, std::nullopt, {other, ""}); }),
            "s: seal: expected " + other + " (--expect), found " + seal);
  EXPECT_NE(error_of([&] { check_trust("s", seal, std::nullopt, {"", dir + "/k.pub"}); }).find("signature: expected a signature by the key in"),
            std::string::npos);
  EXPECT_NE(error_of([&] { check_trust("s", seal, sig, {"", dir + "/o.pub"}); }).find("s: signature.public_key: expected "),
            std::string::npos);
  // A signature of another seal does not transfer.
  EXPECT_EQ(error_of([&] { check_trust("s", other, sig, {"", dir + "/k.pub"}); }),
            "s: signature.value: expected a valid Ed25519 signature of the seal, found an invalid signature");
  // Round trip of the JSON form, and its strict reader.
  EXPECT_EQ(signature_from_json(nlohmann::json(signature_to_json(sig)), "s").value, sig.value);
  auto j = nlohmann::json(signature_to_json(sig));
  j["extra"] = 1;
  EXPECT_THROW(signature_from_json(j, "s"), Error);
  j = nlohmann::json(signature_to_json(sig));
  j["algorithm"] = "rsa";
  EXPECT_EQ(error_of([&] { signature_from_json(j, "s"); }), "s: signature.algorithm: expected ed25519, found 'rsa'");
}

}  // namespace
}  // namespace ember::kv
