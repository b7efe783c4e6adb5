#pragma once
// The one field reader for every JSON document ember reads (snapshot and mapped manifests,
// mapper and calibration manifests, receipts, packs): an object view that refuses unknown
// (done()), missing and mistyped keys, with typed getters and range checks. Duplicated keys
// are refused earlier, by parse_json_strict (util/json_strict.h). Every error is one line,
// "<where>: <path>: expected ..., found ...", where <where> is the file and <path> the JSON
// path of the field ("layers[2].heads[0].k_r2_eval").
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

namespace ember {

class StrictObject {
 public:
  // Error unless j is an object. path: the JSON path of j ("" for the top level).
  StrictObject(const nlohmann::json& j, std::string path, std::string where);

  StrictObject object(const std::string& key);
  std::string string(const std::string& key, size_t max_len = 4096);
  // string(key) that must equal `expected` (a format tag, a fixed file name).
  void expect_string(const std::string& key, const std::string& expected);
  int64_t integer(const std::string& key, int64_t lo, int64_t hi);
  uint64_t unsigned_integer(const std::string& key, uint64_t hi);
  bool boolean(const std::string& key);
  // A finite number (integer or float).
  double number(const std::string& key);
  // A finite number, or null read as NaN (how ember writes a metric that has no value).
  double number_or_null(const std::string& key);
  // A number that is exactly an f32 value (as written from a float), finite.
  float f32(const std::string& key);
  // An array of at most max_items elements.
  const nlohmann::json& array(const std::string& key, size_t max_items = SIZE_MAX);
  // Element i of the array `key` (already read with array()) as an object.
  StrictObject object_at(const std::string& key, const nlohmann::json& arr, size_t i) const;

  // The JSON path of key in this object ("prefix.count") and of element i of array key.
  std::string field(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  std::string element(const std::string& key, size_t i) const {
    return field(key) + "[" + std::to_string(i) + "]";
  }
  const std::string& where() const { return where_; }
  const std::string& path() const { return path_; }
  bool has(const std::string& key) const { return j_.contains(key); }
  // Error naming the first key never read (an unknown key).
  void done() const;

 private:
  const nlohmann::json& take(const std::string& key);
  const nlohmann::json& j_;
  std::string path_;
  std::string where_;
  std::set<std::string> seen_;
};

// "string", "integer", ... for messages.
std::string json_type_name(const nlohmann::json& j);

}  // namespace ember
