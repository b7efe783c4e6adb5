#include "contract/registry.h"

#include <sys/stat.h>

#include <algorithm>

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
