// Bridge receipts that pass the schema but describe no possible run, and evidence that does not
// match the file it names (issue 12, "Sealed manifests and trust": receipts).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "contract/receipt.h"
#include "support/test_support.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/sha256.h"

namespace ember::contract {
namespace {

using nlohmann::json;

// A schema-valid hybrid receipt over a 5-layer target, plan reused [0,2) recomputed [2,5).
BridgeReceipt hybrid() {
  BridgeReceipt r;
  r.relation = "cross-model";
  r.source = {test::hex64('a'), "llama", test::hex64('c'), "a.gguf"};
  r.target = {test::hex64('b'), "llama", test::hex64('c'), "b.gguf"};
  r.kind = "hybrid";
  r.layers = LayerPlan{{0, 1}, {}, {2, 3, 4}};
  r.held_out = true;
  r.created_by = "test";
  return r;
}

bool has(const std::vector<std::string>& errors, const std::string& part) {
  return std::any_of(errors.begin(), errors.end(), [&](const std::string& e) { return e.find(part) != std::string::npos; });
}

// Each case was accepted before (validate_receipt returned no error: the schema alone cannot
// relate two lists, or two endpoints); checked by running these cases against main's
// contract library: every EXPECT_TRUE(has(...)) below failed, the baseline passed.
TEST(ReceiptConsistency, TheBaselineIsValid) {
  const auto e = validate_receipt(hybrid().to_json());
  EXPECT_TRUE(e.empty()) << e.front();
}

TEST(ReceiptConsistency, ALayerInTwoRoleListsIsRefused) {
  BridgeReceipt r = hybrid();
  r.layers->mapped = {2};  // 2 is also recomputed
  const auto e = validate_receipt(r.to_json());
  EXPECT_TRUE(has(e, "/translator/layers: expected each layer in one role list, found layer 2 in mapped and recomputed"))
      << (e.empty() ? "accepted" : e.front());
}

TEST(ReceiptConsistency, ALayerBeyondTheModelIsRefused) {
  BridgeReceipt r = hybrid();
  r.layers->recomputed = {2, 3, 4, 4096 - 1};  // the plan is no longer layers 0..L-1
  const auto e = validate_receipt(r.to_json());
  EXPECT_TRUE(has(e, "/translator/layers: expected the layers 0..5 of the model, found layer 4095"))
      << (e.empty() ? "accepted" : e.front());
}

TEST(ReceiptConsistency, EmptyRoleListsAreRefused) {
  BridgeReceipt r = hybrid();
  r.layers = LayerPlan{};
  const auto e = validate_receipt(r.to_json());
  EXPECT_TRUE(has(e, "/translator/layers: expected at least one layer, found empty role lists"))
      << (e.empty() ? "accepted" : e.front());
}

TEST(ReceiptConsistency, DifferentTokenizersAreRefused) {
  BridgeReceipt r = hybrid();
  r.target.tokenizer_identity = test::hex64('d');
  const auto e = validate_receipt(r.to_json());
  EXPECT_TRUE(has(e, "/target/tokenizer_identity: expected the source's tokenizer identity"))
      << (e.empty() ? "accepted" : e.front());
  // The file reader and the writer apply the same rules.
  const std::string dir = test::temp_dir("receipt_tok");
  EXPECT_THROW(write_receipt(dir + "/r.json", r, false), Error);
  write_file_atomic(dir + "/r.json", r.to_json().dump(2), false);
  EXPECT_TRUE(has(validate_file(dir + "/r.json").errors, "/target/tokenizer_identity"));
}

// A validated receipt's evidence names a file beside it: its SHA-256 must be that file's.
TEST(ReceiptConsistency, EvidenceIsCheckedAgainstThePresentFile) {
  const std::string dir = test::temp_dir("receipt_evidence");
  write_file_atomic(dir + "/eval.json", "{\"agreement\": 1.0}\n", false);
  BridgeReceipt r = hybrid();
  r.status = "validated";
  r.n_comparisons = 80;
  r.metrics["next_token_agreement"] = 1.0;
  r.metrics["mean_rel_logit_error"] = 1e-8;
  r.evidence.push_back({"held-out-evaluation", sha256_hex(std::string("{\"agreement\": 1.0}\n")), "eval.json", "80 prompts"});
  write_receipt(dir + "/ok.json", r, false);  // matches: written
  EXPECT_TRUE(validate_file(dir + "/ok.json").errors.empty());
  // The evidence file changes after the receipt was written: the receipt no longer holds.
  write_file_atomic(dir + "/eval.json", "{\"agreement\": 0.2}\n", true);
  const auto e = validate_file(dir + "/ok.json").errors;
  EXPECT_TRUE(has(e, "/evidence/0/sha256: expected the SHA-256 of " + dir + "/eval.json")) << (e.empty() ? "accepted" : e.front());
  EXPECT_THROW(write_receipt(dir + "/again.json", r, false), Error);
  // A receipt whose evidence is not here is judged on its structure alone.
  r.evidence[0].path = "elsewhere/eval.json";
  EXPECT_NO_THROW(write_receipt(dir + "/moved.json", r, false));
}

}  // namespace
}  // namespace ember::contract
