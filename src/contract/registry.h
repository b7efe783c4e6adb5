#pragma once
// The translator registry as a gate (docs/contracts.md, "Registry workflow").
//
// A registry file (ember.translator-registry-file.v1) holds translator-registry entries
// (ember.translator-registry.v1, one schema per entry) sorted by id, ids unique, written as
// canonical JSON (sorted keys, no whitespace, one final newline) and atomically. Before a
// mapper is applied with --registry, require_registered() looks it up by (source identity,
// target identity, kind, mapper hash) and refuses, naming the entry and the field, a mapper
// that is absent, registered for other models, revoked, not validated, or validated on
// evidence that does not hash to the files its receipts name.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "contract/receipt.h"

namespace ember::contract {

inline constexpr const char* kRegistryFileFormat = "ember.translator-registry-file.v1";

// The registry as read: strictly parsed, the file schema, every entry's own schema, ids unique
// and sorted. Error naming the file, the entry and the field otherwise. A missing file is an
// error (use Registry::empty() to start one).
struct Registry {
  std::vector<nlohmann::json> entries;  // in id order
  static Registry read(const std::string& path);
  static Registry empty() { return {}; }
  nlohmann::json to_json() const;
  // Canonical text (ember::canonical_json + "\n"): the same registry, the same bytes.
  std::string text() const;
  // Adds (or, with replace, replaces by id) one entry, validated against its schema.
  // Error naming the id when it is already present and !replace.
  void add(const nlohmann::json& entry, bool replace, const std::string& where);
  // Atomically; refuses to replace an existing file unless overwrite (registry add passes true
  // for the file it read).
  void write(const std::string& path, bool overwrite) const;
};

// An entry as `registry add` reads it from its own file (ENTRY.json): a relative receipt
// `path` there is relative to that file's directory, as a receipt's evidence paths are to the
// receipt's, so an entry and the receipts beside it can be added to a registry anywhere. The
// registry keeps paths relative to its own directory: each relative path is rewritten so
// (absolute paths are kept). `entry_path` "-" (standard input) means the current directory.
nlohmann::json rebase_receipt_paths(nlohmann::json entry, const std::string& entry_path,
                                    const std::string& registry_path);

// The registry entry (ember.translator-registry.v1) of the translator a bridge receipt
// describes: its source and target endpoints, kind and mapper hash, the receipt's status
// (ember's own receipts say research; validated only when the receipt is), and the receipt by
// the SHA-256 of its bytes with `path` relative to the registry's directory. The receipt must
// be a valid bridge receipt (validate_file); Error naming the file and field otherwise.
nlohmann::json entry_from_receipt(const std::string& receipt_path, const std::string& registry_path,
                                  const std::string& id, const std::string& description);

// What is being applied.
struct RegistryQuery {
  Endpoint source, target;   // model identity, arch, tokenizer identity (name ignored)
  std::string kind;          // identity | ridge | affine | hybrid
  std::string mapper_hash;   // "" only for a hybrid without mapped layers (entry null)
};

struct Registration {
  std::string id;
  std::string entry_sha256;  // SHA-256 of the entry's canonical JSON
  std::string label() const { return "registered " + id + " sha256:" + entry_sha256; }
};

// Evidence of one entry: each receipt that names a path must be a regular file (relative to
// the registry's directory) with that SHA-256, and a validated entry needs at least one
// validated receipt whose file was checked. One line per problem; empty when sound.
std::vector<std::string> registry_evidence_problems(const nlohmann::json& entry, const std::string& registry_path);

// The gate. Returns the matching validated entry; throws Error otherwise, one line:
//   absent:   "<reg>: mapper <hash> (kind K): expected a registry entry, found none ..."
//   identity: "<reg>: entry ID: source.model_identity: expected <entry's>, found <applied>"
//   status:   "<reg>: entry ID: status: expected validated, found revoked"
//   evidence: "<reg>: entry ID: receipts[1].sha256: expected the SHA-256 of FILE (...), found ..."
Registration require_registered(const std::string& registry_path, const RegistryQuery& q);

// `registry check`: every entry's evidence (registry_evidence_problems), "<id>: <problem>".
std::vector<std::string> check_registry(const std::string& registry_path);

}  // namespace ember::contract
