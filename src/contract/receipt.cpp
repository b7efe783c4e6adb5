#include "contract/receipt.h"

#include <sys/stat.h>

#include <map>

#include "contract/certificate.h"
#include "contract/json_schema.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json_strict.h"
#include "util/sha256.h"

namespace ember::contract {

using nlohmann::json;

namespace {

json endpoint_json(const Endpoint& e) {
  json j = {{"model_identity", e.model_identity}, {"arch", e.arch},
            {"tokenizer_identity", e.tokenizer_identity}};
  if (!e.name.empty()) j["name"] = e.name;
  return j;
}

constexpr const char* kBridgeFormat = "ember.bridge-receipt.v2";

// The checks below read fields the schema guarantees (types, presence), so they run only on
// a schema-valid bridge receipt: any other document, a schema-invalid receipt included, has
// nothing for them to say (its schema violations are reported by the validator).
bool is_valid_bridge_receipt(const json& doc) {
  return doc.is_object() && doc.contains("format") && doc["format"] == kBridgeFormat &&
         builtin_schema("bridge-receipt").validate(doc).empty();
}

}  // namespace

std::string evidence_path(const std::string& path, const std::string& document_path) {
  if (path.empty() || path[0] == '/') return path;
  const size_t slash = document_path.rfind('/');
  return (slash == std::string::npos ? std::string(".") : document_path.substr(0, slash)) + "/" + path;
}

bool is_regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::vector<std::string> receipt_consistency(const json& r) {
  std::vector<std::string> out;
  if (!is_valid_bridge_receipt(r)) return out;
  // Every ember translator is token-aligned (position i of the source cache is position i of
  // the target's): a receipt of any kind claims that both ends tokenize the same way.
  const auto& st = r["source"]["tokenizer_identity"];
  const auto& tt = r["target"]["tokenizer_identity"];
  if (st != tt)
    out.push_back("/target/tokenizer_identity: expected the source's tokenizer identity " + st.dump() +
                  " (every ember translator is token-aligned), found " + tt.dump());
  const auto& t = r["translator"];
  if (t.contains("layers")) {
    // The plan assigns each layer of the target exactly one role, layers 0..L-1, none missing:
    // a layer in two lists, a layer past the others (beyond the model) or no layer at all is
    // a receipt that describes no run.
    std::map<int64_t, std::string> role_of;
    for (const char* role : {"reused", "mapped", "recomputed"}) {
      for (const auto& v : t["layers"][role]) {
        const int64_t l = v.get<int64_t>();
        const auto [it, fresh] = role_of.emplace(l, role);
        if (!fresh)
          out.push_back("/translator/layers: expected each layer in one role list, found layer " +
                        std::to_string(l) + " in " + it->second + " and " + role);
      }
    }
    if (role_of.empty()) {
      out.push_back("/translator/layers: expected at least one layer, found empty role lists");
    } else {
      const int64_t n = int64_t(role_of.size());
      const int64_t last = role_of.rbegin()->first;
      if (last != n - 1)
        out.push_back("/translator/layers: expected the layers 0.." + std::to_string(n - 1) +
                      " of the model, found layer " + std::to_string(last) + " (layers missing below it)");
    }
  }
  return out;
}

std::vector<std::string> receipt_evidence_mismatches(const json& r, const std::string& receipt_path) {
  std::vector<std::string> out;
  if (!is_valid_bridge_receipt(r) || !r.contains("evidence")) return out;
  const auto& ev = r["evidence"];
  for (size_t i = 0; i < ev.size(); ++i) {
    if (!ev[i].contains("path")) continue;
    std::string path = ev[i]["path"].get<std::string>();
    if (path.empty()) continue;
    path = evidence_path(path, receipt_path);
    if (!is_regular_file(path)) continue;  // not here: nothing to check against
    const std::string found = sha256_file_hex(path);
    const std::string want = ev[i]["sha256"].get<std::string>();
    if (found != want)
      out.push_back("/evidence/" + std::to_string(i) + "/sha256: expected the SHA-256 of " + path + " (" +
                    found + "), found " + want);
  }
  return out;
}

json BridgeReceipt::to_json() const {
  json j;
  j["format"] = kBridgeFormat;
  if (!created_by.empty()) j["created_by"] = created_by;
  j["source"] = endpoint_json(source);
  j["target"] = endpoint_json(target);
  json t = {{"kind", kind}, {"relation", relation},
            {"mapper_hash", mapper_hash.empty() ? json(nullptr) : json(mapper_hash)}};
  if (lambda) t["lambda"] = *lambda;
  if (anchor_lambda) t["anchor_lambda"] = *anchor_lambda;
  if (layers)
    t["layers"] = {{"reused", layers->reused}, {"mapped", layers->mapped},
                   {"recomputed", layers->recomputed}};
  j["translator"] = t;
  if (calibration)
    j["calibration"] = {{"split_hash", calibration->split_hash},
                        {"n_calib", calibration->n_calib},
                        {"n_eval", calibration->n_eval}};
  json ev = {{"held_out", held_out}, {"metrics", json::object()}};
  if (n_comparisons) ev["n_comparisons"] = *n_comparisons;
  for (const auto& [k, v] : metrics) ev["metrics"][k] = v;  // NaN/Inf dump as null: refused
  j["evaluation"] = ev;
  j["status"] = status;
  if (!evidence.empty()) {
    j["evidence"] = json::array();
    for (const auto& e : evidence) {
      json x = {{"kind", e.kind}, {"sha256", e.sha256}, {"description", e.description}};
      if (!e.path.empty()) x["path"] = e.path;
      j["evidence"].push_back(x);
    }
  }
  if (!notes.empty()) j["notes"] = notes;
  return j;
}

std::vector<std::string> validate_receipt(const json& receipt) {
  // Round-trip through text so a NaN metric (null in JSON) is judged as it would be on disk.
  const json on_disk = json::parse(receipt.dump());
  std::vector<std::string> errors = builtin_schema("bridge-receipt").validate(on_disk);
  if (errors.empty()) errors = receipt_consistency(on_disk);
  return errors;
}

void write_contract_json(const std::string& path, const json& doc, bool force) {
  const json on_disk = json::parse(doc.dump());
  DocumentCheck check = validate_document(on_disk, path);
  if (check.errors.empty()) check.errors = receipt_evidence_mismatches(on_disk, path);
  if (!check.errors.empty())
    fail(path, "refusing to write an invalid " + check.schema + " document: " + check.errors.front());
  write_file_atomic(path, doc.dump(2) + "\n", force);
}

void write_receipt(const std::string& path, const BridgeReceipt& receipt, bool force) {
  write_contract_json(path, receipt.to_json(), force);
}

DocumentCheck validate_document(const json& doc, std::string_view where) {
  if (!doc.is_object()) fail_field(where, "document", "a JSON object", doc.type_name());
  auto it = doc.find("format");
  if (it == doc.end() || !it->is_string())
    fail_field(where, "format", "a string naming the document kind", it == doc.end() ? "no field" : it->dump());
  // v1 had no relation label: refused by name rather than read with a guessed one.
  if (*it == "ember.bridge-receipt.v1")
    fail_field(where, "format",
               std::string(kBridgeFormat) + " (v1 receipts carry no relation label and are no longer accepted; "
               "re-run the ember map command that wrote it)",
               "\"ember.bridge-receipt.v1\"");
  const JsonSchema& schema = schema_for_format(it->get<std::string>(), where);
  std::string stem = schema.name();
  stem = stem.substr(stem.find('/') + 1);
  stem = stem.substr(0, stem.find(".schema.json"));
  std::vector<std::string> errors = schema.validate(doc);
  if (errors.empty()) errors = receipt_consistency(doc);  // only meaningful on a valid shape
  if (errors.empty()) errors = certificate_consistency(doc);
  return {stem, errors};
}

DocumentCheck validate_file(const std::string& path) {
  const json doc = parse_json_strict(read_input(path, 64u << 20), path);
  DocumentCheck check = validate_document(doc, path);
  if (check.errors.empty()) check.errors = receipt_evidence_mismatches(doc, path);
  return check;
}

}  // namespace ember::contract
