#include "kv/strict_json.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "util/error.h"

namespace ember::kv {

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

namespace {

bool is_scalar(const ordered_json& j) { return !j.is_object() && !j.is_array(); }

void emit(const ordered_json& j, int indent, std::string& out) {
  const std::string pad(size_t(indent) + 2, ' ');
  if (j.is_object()) {
    if (j.empty()) {
      out += "{}";
      return;
    }
    out += "{\n";
    bool first = true;
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (!first) out += ",\n";
      first = false;
      out += pad;
      out += ordered_json(it.key()).dump();
      out += ": ";
      emit(it.value(), indent + 2, out);
    }
    out += "\n" + std::string(size_t(indent), ' ') + "}";
  } else if (j.is_array()) {
    bool flat = true;
    for (const auto& e : j) flat = flat && is_scalar(e);
    if (j.empty()) {
      out += "[]";
    } else if (flat) {
      out += "[";
      bool first = true;
      for (const auto& e : j) {
        if (!first) out += ", ";
        first = false;
        out += e.dump();
      }
      out += "]";
    } else {
      out += "[\n";
      bool first = true;
      for (const auto& e : j) {
        if (!first) out += ",\n";
        first = false;
        out += pad;
        emit(e, indent + 2, out);
      }
      out += "\n" + std::string(size_t(indent), ' ') + "]";
    }
  } else {
    out += j.dump();
  }
}

}  // namespace

std::string canonical_json(const ordered_json& j) {
  std::string out;
  emit(j, 0, out);
  out += "\n";
  return out;
}

StrictObject::StrictObject(const json& j, std::string path, const std::string& where)
    : j_(j), path_(std::move(path)), where_(where) {
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

const json& StrictObject::array(const std::string& key) {
  const json& v = take(key);
  if (!v.is_array()) fail_field(where_, field(key), "an array", json_type_name(v));
  return v;
}

void StrictObject::done() const {
  for (auto it = j_.begin(); it != j_.end(); ++it)
    if (!seen_.count(it.key())) fail_field(where_, field(it.key()), "no such key", "an unknown key");
}

}  // namespace ember::kv
