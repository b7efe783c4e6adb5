#pragma once
// Strict JSON for ember's manifests and receipts: a parser that rejects duplicated keys
// (nlohmann silently keeps the last one), a reader that rejects unknown, missing and
// mistyped keys, and a canonical writer (fixed key order, stable bytes).
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "util/json_strict.h"

namespace ember::kv {

using ordered_json = nlohmann::ordered_json;

// ember::parse_json_strict (util/json_strict.h) with the depth limit of ember's own
// manifests and receipts (16).
inline nlohmann::json parse_json_strict(const std::string& text, const std::string& where,
                                        int max_depth = 16, size_t max_values = SIZE_MAX) {
  return ember::parse_json_strict(text, where, max_depth, max_values);
}

// Canonical text: objects in insertion order with 2-space indent, arrays of scalars on one
// line, strings escaped as nlohmann does (UTF-8 kept), a final newline.
std::string canonical_json(const ordered_json& j);

// Reads one JSON object field by field. Every accessor names the dotted path on error
// ("<where>: prefix.count: expected ..., found ..."); done() rejects keys never read.
class StrictObject {
 public:
  StrictObject(const nlohmann::json& j, std::string path, const std::string& where);
  StrictObject object(const std::string& key);
  std::string string(const std::string& key, size_t max_len = 4096);
  int64_t integer(const std::string& key, int64_t lo, int64_t hi);
  uint64_t unsigned_integer(const std::string& key, uint64_t hi);
  bool boolean(const std::string& key);
  // A number that is exactly an f32 value (as written from a float), finite.
  float f32(const std::string& key);
  const nlohmann::json& array(const std::string& key);
  std::string field(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  const std::string& where() const { return where_; }
  void done() const;

 private:
  const nlohmann::json& take(const std::string& key);
  const nlohmann::json& j_;
  std::string path_;
  const std::string& where_;
  std::set<std::string> seen_;
};

// "string", "integer", ... for messages.
std::string json_type_name(const nlohmann::json& j);

}  // namespace ember::kv
