#include "util/json_fields.h"

#include <cmath>

#include "util/error.h"

namespace ember {

using nlohmann::json;

std::string json_type_name(const json& j) {
  switch (j.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "object";
    case json::value_t::array: return "array";
    case json::value_t::string: return "string";
    case json::value_t::boolean: return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "integer";
    case json::value_t::number_float: return "number";
    default: return "other";
  }
}

StrictObject::StrictObject(const json& j, std::string path, std::string where)
    : j_(j), path_(std::move(path)), where_(std::move(where)) {
  if (!j_.is_object())
    fail_field(where_, path_.empty() ? "top level" : path_, "an object", json_type_name(j_));
}

const json& StrictObject::take(const std::string& key) {
  const auto it = j_.find(key);
  if (it == j_.end()) fail_field(where_, field(key), "present", "missing");
  seen_.insert(key);
  return *it;
}

StrictObject StrictObject::object(const std::string& key) {
  return StrictObject(take(key), field(key), where_);
}

std::string StrictObject::string(const std::string& key, size_t max_len) {
  const json& v = take(key);
  if (!v.is_string()) fail_field(where_, field(key), "a string", json_type_name(v));
  const auto& s = v.get_ref<const std::string&>();
  if (s.size() > max_len)
    fail_field(where_, field(key), "at most " + std::to_string(max_len) + " characters",
               std::to_string(s.size()) + " characters");
  return s;
}

int64_t StrictObject::integer(const std::string& key, int64_t lo, int64_t hi) {
  const json& v = take(key);
  if (!v.is_number_integer()) fail_field(where_, field(key), "an integer", json_type_name(v));
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX))
    fail_field(where_, field(key), "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]",
               v.dump());
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi)
    fail_field(where_, field(key), "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]",
               std::to_string(x));
  return x;
}

uint64_t StrictObject::unsigned_integer(const std::string& key, uint64_t hi) {
  const json& v = take(key);
  if (!v.is_number_integer()) fail_field(where_, field(key), "an integer", json_type_name(v));
  if (!v.is_number_unsigned() && v.get<int64_t>() < 0)
    fail_field(where_, field(key), "a non-negative integer", v.dump());
  const uint64_t x = v.get<uint64_t>();
  if (x > hi) fail_field(where_, field(key), "at most " + std::to_string(hi), std::to_string(x));
  return x;
}

bool StrictObject::boolean(const std::string& key) {
  const json& v = take(key);
  if (!v.is_boolean()) fail_field(where_, field(key), "true or false", json_type_name(v));
  return v.get<bool>();
}

float StrictObject::f32(const std::string& key) {
  const json& v = take(key);
  if (!v.is_number()) fail_field(where_, field(key), "a number", json_type_name(v));
  const double d = v.get<double>();
  if (!std::isfinite(d) || double(float(d)) != d)
    fail_field(where_, field(key), "a finite value exactly representable as f32", v.dump());
  return float(d);
}

const json& StrictObject::array(const std::string& key, size_t max_items) {
  const json& v = take(key);
  if (!v.is_array()) fail_field(where_, field(key), "an array", json_type_name(v));
  if (v.size() > max_items)
    fail_field(where_, field(key), "at most " + std::to_string(max_items) + " elements",
               std::to_string(v.size()) + " elements");
  return v;
}

StrictObject StrictObject::object_at(const std::string& key, const json& arr, size_t i) const {
  return StrictObject(arr.at(i), element(key, i), where_);
}

void StrictObject::expect_string(const std::string& key, const std::string& expected) {
  const std::string s = string(key);
  if (s != expected) fail_field(where_, field(key), json(expected).dump(), json(s).dump());
}

double StrictObject::number(const std::string& key) {
  const json& v = take(key);
  if (!v.is_number()) fail_field(where_, field(key), "a number", json_type_name(v));
  const double d = v.get<double>();
  if (!std::isfinite(d)) fail_field(where_, field(key), "a finite number", v.dump());
  return d;
}

double StrictObject::number_or_null(const std::string& key) {
  if (has(key) && j_.at(key).is_null()) {
    seen_.insert(key);
    return std::nan("");
  }
  const json& v = take(key);
  if (!v.is_number()) fail_field(where_, field(key), "a number or null", json_type_name(v));
  const double d = v.get<double>();
  if (!std::isfinite(d)) fail_field(where_, field(key), "a finite number or null", v.dump());
  return d;
}

void StrictObject::done() const {
  for (auto it = j_.begin(); it != j_.end(); ++it)
    if (!seen_.count(it.key())) fail_field(where_, field(it.key()), "no such key", "an unknown key");
}

}  // namespace ember
