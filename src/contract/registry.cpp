#include "contract/registry.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include "contract/json_schema.h"
#include "contract/receipt.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json_strict.h"
#include "util/sha256.h"

namespace ember::contract {

using nlohmann::json;

namespace {

constexpr size_t kMaxRegistryBytes = size_t(16) << 20;

std::string entry_id(const json& e) { return e.value("id", std::string("?")); }

void check_entry(const json& e, const std::string& where) {
  const DocumentCheck c = validate_document(e, where);
  if (c.schema != "translator-registry")
    fail_field(where, "format", "ember.translator-registry.v1 (a registry entry)", "a " + c.schema + " document");
  if (!c.errors.empty()) fail(where, "invalid registry entry: " + c.errors.front());
}

}  // namespace

Registry Registry::read(const std::string& path) {
  const json doc = parse_json_strict(read_file(path, kMaxRegistryBytes), path);
  const DocumentCheck c = validate_document(doc, path);
  if (c.schema != "translator-registry-file")
    fail_field(path, "format", kRegistryFileFormat, "a " + c.schema + " document");
  if (!c.errors.empty()) fail(path, "invalid registry: " + c.errors.front());
  Registry r;
  for (size_t i = 0; i < doc["entries"].size(); ++i) {
    const json& e = doc["entries"][i];
    check_entry(e, path + ": entries[" + std::to_string(i) + "]");
    if (!r.entries.empty() && entry_id(r.entries.back()) >= entry_id(e))
      fail_field(path, "entries[" + std::to_string(i) + "].id",
                 "ids unique and in ascending order (after \"" + entry_id(r.entries.back()) + "\")",
                 "\"" + entry_id(e) + "\"");
    r.entries.push_back(e);
  }
  return r;
}

json Registry::to_json() const { return {{"format", kRegistryFileFormat}, {"entries", entries}}; }

std::string Registry::text() const { return ember::canonical_json(to_json()) + "\n"; }

void Registry::add(const json& entry, bool replace, const std::string& where) {
  check_entry(entry, where);
  const std::string id = entry_id(entry);
  auto it = std::find_if(entries.begin(), entries.end(), [&](const json& e) { return entry_id(e) >= id; });
  if (it != entries.end() && entry_id(*it) == id) {
    if (!replace) fail_field(where, "id", "an id not yet registered (pass --replace to update it)", "\"" + id + "\"");
    *it = entry;
  } else {
    entries.insert(it, entry);
  }
}

void Registry::write(const std::string& path, bool overwrite) const { write_file_atomic(path, text(), overwrite); }

std::vector<std::string> registry_evidence_problems(const json& e, const std::string& registry_path) {
  std::vector<std::string> out;
  bool validated_checked = false;
  const json& receipts = e["receipts"];
  for (size_t i = 0; i < receipts.size(); ++i) {
    const json& r = receipts[i];
    if (!r.contains("path")) continue;
    std::string path = r["path"].get<std::string>();
    const std::string field = "receipts[" + std::to_string(i) + "]";
    path = evidence_path(path, registry_path);
    if (!is_regular_file(path)) {
      out.push_back(field + ".path: expected a regular file to hash, found none at " + path);
      continue;
    }
    const std::string found = sha256_hex(read_file(path));
    if (found != r["sha256"].get<std::string>()) {
      out.push_back(field + ".sha256: expected the SHA-256 of " + path + " (" + found + "), found " +
                    r["sha256"].get<std::string>());
      continue;
    }
    if (r["status"] == "validated") validated_checked = true;
  }
  if (e["status"] == "validated" && !validated_checked && out.empty())
    out.push_back("receipts: expected a validated receipt whose path names its file (so its hash can be checked), found none");
  return out;
}

namespace {

// `path` (relative to the directory of `from_document`) as a path relative to the directory of
// `to_document`. Both are resolved as far as they exist (weakly_canonical), so a symlinked
// directory does not make a wrong "..".
std::string relative_between(const std::string& path, const std::string& from_document,
                             const std::string& to_document) {
  namespace fs = std::filesystem;
  const fs::path target = fs::weakly_canonical(fs::absolute(evidence_path(path, from_document)));
  const fs::path base = fs::weakly_canonical(fs::absolute(evidence_path(".", to_document)));
  const fs::path rel = target.lexically_relative(base);
  return rel.empty() ? target.string() : rel.string();
}

}  // namespace

json rebase_receipt_paths(json entry, const std::string& entry_path, const std::string& registry_path) {
  if (!entry.is_object() || !entry.contains("receipts") || !entry["receipts"].is_array()) return entry;
  const std::string from = entry_path == "-" ? "./-" : entry_path;
  for (json& r : entry["receipts"])
    if (r.is_object() && r.contains("path") && r["path"].is_string()) {
      const std::string p = r["path"].get<std::string>();
      if (!p.empty() && p[0] != '/') r["path"] = relative_between(p, from, registry_path);
    }
  return entry;
}

json entry_from_receipt(const std::string& receipt_path, const std::string& registry_path, const std::string& id,
                        const std::string& description) {
  // One read: the bytes judged are the bytes hashed (validate_file's checks, on them).
  const std::string bytes = read_file(receipt_path, kMaxRegistryBytes);
  const json r = parse_json_strict(bytes, receipt_path);
  DocumentCheck c = validate_document(r, receipt_path);
  if (c.schema != "bridge-receipt")
    fail_field(receipt_path, "format", "ember.bridge-receipt.v2 (a bridge receipt)", "a " + c.schema + " document");
  if (c.errors.empty()) c.errors = receipt_evidence_mismatches(r, receipt_path);
  if (!c.errors.empty()) fail(receipt_path, "invalid bridge receipt: " + c.errors.front());
  auto endpoint = [](const json& e) {
    json out = {{"model_identity", e["model_identity"]}, {"arch", e["arch"]}, {"tokenizer_identity", e["tokenizer_identity"]}};
    if (e.contains("name")) out["name"] = e["name"];
    return out;
  };
  json entry = {{"format", "ember.translator-registry.v1"},
                {"id", id},
                {"source", endpoint(r["source"])},
                {"target", endpoint(r["target"])},
                {"kind", r["translator"]["kind"]},
                {"mapper_hash", r["translator"]["mapper_hash"]},
                {"status", r["status"]},
                {"receipts", {{{"sha256", sha256_hex(bytes)},
                               {"status", r["status"]},
                               {"path", relative_between(receipt_path, "./-", registry_path)}}}}};
  if (!description.empty()) entry["description"] = description;
  return entry;
}

Registration require_registered(const std::string& reg, const RegistryQuery& q) {
  const Registry r = Registry::read(reg);
  const json want_hash = q.mapper_hash.empty() ? json(nullptr) : json(q.mapper_hash);
  std::vector<const json*> by_mapper;
  for (const json& e : r.entries)
    if (e["mapper_hash"] == want_hash && e["kind"] == q.kind) by_mapper.push_back(&e);
  const std::string what = "mapper " + (q.mapper_hash.empty() ? std::string("(none)") : q.mapper_hash) + " (kind " + q.kind + ")";
  if (by_mapper.empty())
    fail_field(reg, what, "a registry entry",
               "none (register it with ember contract registry add, or run without --registry: the cache is then "
               "labelled unregistered)");
  // The first entry for this mapper that names other models is reported field by field.
  const json* match = nullptr;
  std::string mismatch;
  for (const json* e : by_mapper) {
    std::string m;
    for (const auto& [side, ep] : {std::pair<const char*, const Endpoint*>{"source", &q.source}, {"target", &q.target}}) {
      const json& x = (*e)[side];
      for (const auto& [k, v] : {std::pair<const char*, const std::string*>{"model_identity", &ep->model_identity},
                                 {"tokenizer_identity", &ep->tokenizer_identity}, {"arch", &ep->arch}})
        if (m.empty() && x[k] != *v)
          m = "entry " + entry_id(*e) + ": " + side + "." + k + ": expected " + x[k].get<std::string>() +
              " (the registered " + side + "), found " + *v;
    }
    if (m.empty()) {
      match = e;
      break;
    }
    if (mismatch.empty()) mismatch = m;
  }
  if (!match) fail(reg, mismatch);
  const json& e = *match;
  const std::string id = entry_id(e);
  if (e["status"] != "validated")
    fail_field(reg, "entry " + id + ": status", "validated",
               e["status"].get<std::string>() + (e["status"] == "revoked" ? " (the translator was withdrawn)" : ""));
  const auto problems = registry_evidence_problems(e, reg);
  if (!problems.empty()) fail(reg, "entry " + id + ": " + problems.front());
  return {id, sha256_hex(ember::canonical_json(e))};
}

std::vector<std::string> check_registry(const std::string& reg) {
  std::vector<std::string> out;
  for (const json& e : Registry::read(reg).entries)
    for (const std::string& p : registry_evidence_problems(e, reg)) out.push_back(entry_id(e) + ": " + p);
  return out;
}

}  // namespace ember::contract
