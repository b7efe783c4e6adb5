#pragma once
// Translator contract: bridge receipts and the other contract documents, built as plain
// structs and checked against the compiled-in schemas (schemas/*.schema.json).
//
// Typical use (ember map fit/apply/hybrid):
//   contract::BridgeReceipt r;
//   r.source = {src_identity, "llama", tok_identity, "a.gguf"};  r.target = {...};
//   r.kind = "ridge"; r.relation = "quantization-boundary"; r.mapper_hash = mapper_hex; r.calibration = {{split_hex, 320, 80}};
//   r.held_out = true; r.metrics["k_r2_mean"] = 0.91;
//   contract::write_receipt(out_dir + "/receipt.json", r, force);   // validates first
// A receipt may say status "validated" only with held-out evaluation (n_comparisons >= 1,
// next_token_agreement and mean_rel_logit_error) and at least one evidence item; anything
// less is "research". The schema enforces it, so a careless caller cannot over-claim.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace ember::contract {

struct Endpoint {
  std::string model_identity;      // hex SHA-256 (docs/identity.md)
  std::string arch;                // llama | qwen2 | qwen3
  std::string tokenizer_identity;  // hex SHA-256
  std::string name;                // optional: a file name for humans (not identity)
};

struct LayerPlan {  // which target layers were reused byte for byte, mapped, recomputed
  std::vector<int> reused, mapped, recomputed;
};

struct Calibration {
  std::string split_hash;  // hex SHA-256 of the frozen calib/eval split manifest
  int64_t n_calib = 0, n_eval = 0;
};

struct Evidence {
  std::string kind;  // held-out-evaluation | parity-gate | replay-gate | study
  std::string sha256;  // of the evidence artifact (report JSON, receipt)
  std::string path;    // optional
  std::string description;
};

struct BridgeReceipt {
  Endpoint source, target;
  std::string kind = "identity";  // identity | ridge | affine | hybrid
  // quantization-boundary | same-base | cross-model: as the user stated it (--relation), never
  // inferred; required by the schema (ember.bridge-receipt.v2).
  std::string relation;
  std::string mapper_hash;        // empty -> null (identity; hybrid without mapped layers)
  std::optional<double> lambda, anchor_lambda;
  std::optional<LayerPlan> layers;
  std::optional<Calibration> calibration;  // required for ridge and affine
  bool held_out = false;                   // metrics measured on prompts no fit has seen
  std::optional<int64_t> n_comparisons;
  // next_token_agreement, mean_rel_logit_error, greedy_agreement, k_r2_mean, v_r2_mean,
  // k_r2_min, v_r2_min, max_abs_logit_diff (the schema refuses any other name and NaN).
  std::map<std::string, double> metrics;
  std::string status = "research";  // research | validated
  std::vector<Evidence> evidence;
  std::string created_by;  // e.g. "ember map fit"
  std::string notes;

  nlohmann::json to_json() const;
};

// Violations of the bridge-receipt schema, then of receipt_consistency(), one line each;
// empty when valid.
std::vector<std::string> validate_receipt(const nlohmann::json& receipt);

// What the schema cannot say about a schema-valid bridge receipt, one "<pointer>: expected
// ..., found ..." line each: source and target tokenizer identities differ (every ember
// translator is token-aligned); translator.layers puts a layer in two role lists, lists no
// layer at all, or is not exactly the layers 0..L-1 (a layer beyond the others: beyond the
// model). Empty for any other document, a schema-invalid receipt included.
std::vector<std::string> receipt_consistency(const nlohmann::json& receipt);

// Where a document's evidence `path` points: as is when absolute (or empty), else relative to
// the directory of the document at `document_path` (a receipt, a registry). Shared by the
// receipt and registry evidence checks; is_regular_file says whether there is a file to hash.
std::string evidence_path(const std::string& path, const std::string& document_path);
bool is_regular_file(const std::string& path);

// Evidence items whose `path` names a regular file that is present (relative paths from the
// receipt's directory) must carry that file's SHA-256; one line per mismatch. An absent file
// is not an error (the evidence may live elsewhere). Used by validate_file and write_receipt.
std::vector<std::string> receipt_evidence_mismatches(const nlohmann::json& receipt,
                                                     const std::string& receipt_path);

// Validates, then writes pretty JSON atomically (refuses to overwrite without force).
// Throws Error listing the first violation if the receipt is invalid.
void write_receipt(const std::string& path, const BridgeReceipt& receipt, bool force);
void write_contract_json(const std::string& path, const nlohmann::json& doc, bool force);

// Any ember contract document (bridge receipt, translator registry entry, parity receipt,
// DOMCAP1 pack, tool allowlist), its schema chosen by its "format" field.
struct DocumentCheck {
  std::string schema;               // stem of the schema used, e.g. "bridge-receipt"
  std::vector<std::string> errors;  // empty when valid
};
// Throws Error (naming `where`) when the document has no known "format"; returns the
// schema violations otherwise.
DocumentCheck validate_document(const nlohmann::json& doc, std::string_view where);
// Reads FILE strictly (duplicate keys, bad UTF-8 refused) and validates it (schema,
// receipt_consistency, and receipt_evidence_mismatches against the files present).
DocumentCheck validate_file(const std::string& path);

}  // namespace ember::contract
