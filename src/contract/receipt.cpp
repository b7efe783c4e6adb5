#include "contract/receipt.h"

#include "contract/json_schema.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json_strict.h"

namespace ember::contract {

using nlohmann::json;

namespace {

json endpoint_json(const Endpoint& e) {
  json j = {{"model_identity", e.model_identity}, {"arch", e.arch},
            {"tokenizer_identity", e.tokenizer_identity}};
  if (!e.name.empty()) j["name"] = e.name;
  return j;
}

}  // namespace

json BridgeReceipt::to_json() const {
  json j;
  j["format"] = "ember.bridge-receipt.v1";
  if (!created_by.empty()) j["created_by"] = created_by;
  j["source"] = endpoint_json(source);
  j["target"] = endpoint_json(target);
  json t = {{"kind", kind}, {"mapper_hash", mapper_hash.empty() ? json(nullptr) : json(mapper_hash)}};
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
  return builtin_schema("bridge-receipt").validate(json::parse(receipt.dump()));
}

void write_contract_json(const std::string& path, const json& doc, bool force) {
  const json on_disk = json::parse(doc.dump());
  const DocumentCheck check = validate_document(on_disk, path);
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
  const JsonSchema& schema = schema_for_format(it->get<std::string>(), where);
  std::string stem = schema.name();
  stem = stem.substr(stem.find('/') + 1);
  stem = stem.substr(0, stem.find(".schema.json"));
  return {stem, schema.validate(doc)};
}

DocumentCheck validate_file(const std::string& path) {
  return validate_document(parse_json_strict(read_file(path, 64u << 20), path), path);
}

}  // namespace ember::contract
