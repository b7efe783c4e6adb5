// Metadata values: names, conversions and constructors (parsing is in gguf_file.cpp).
#include <limits>

#include "gguf/gguf_file.h"
#include "util/error.h"

namespace ember::gguf {

const char* value_type_name(ValueType t) {
  switch (t) {
    case ValueType::UINT8: return "uint8";
    case ValueType::INT8: return "int8";
    case ValueType::UINT16: return "uint16";
    case ValueType::INT16: return "int16";
    case ValueType::UINT32: return "uint32";
    case ValueType::INT32: return "int32";
    case ValueType::FLOAT32: return "float32";
    case ValueType::BOOL: return "bool";
    case ValueType::STRING: return "string";
    case ValueType::ARRAY: return "array";
    case ValueType::UINT64: return "uint64";
    case ValueType::INT64: return "int64";
    case ValueType::FLOAT64: return "float64";
  }
  return "unknown";
}

bool Value::is_integer() const {
  switch (type) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::UINT16: case ValueType::INT16:
    case ValueType::UINT32: case ValueType::INT32: case ValueType::UINT64: case ValueType::INT64:
      return true;
    default:
      return false;
  }
}

namespace {
bool is_unsigned(ValueType t) {
  return t == ValueType::UINT8 || t == ValueType::UINT16 || t == ValueType::UINT32 ||
         t == ValueType::UINT64;
}
std::string describe(const Value& v) {
  std::string s = value_type_name(v.type);
  if (v.type == ValueType::ARRAY)
    s += " of " + std::string(value_type_name(v.array_type)) + " (" +
         std::to_string(v.array.size()) + " elements)";
  return s;
}
}  // namespace

int64_t Value::as_int(std::string_view key) const {
  if (!is_integer()) fail_field(key, "value type", "an integer", describe(*this));
  if (is_unsigned(type)) {
    if (u > uint64_t(std::numeric_limits<int64_t>::max()))
      fail_field(key, "value", "an integer <= 2^63-1", std::to_string(u));
    return int64_t(u);
  }
  return i;
}

double Value::as_float(std::string_view key) const {
  if (is_float()) return f;
  if (is_integer()) return is_unsigned(type) ? double(u) : double(i);
  fail_field(key, "value type", "a number", describe(*this));
}

const std::string& Value::as_string(std::string_view key) const {
  if (type != ValueType::STRING) fail_field(key, "value type", "string", describe(*this));
  return str;
}

namespace {
Value integer(ValueType t, uint64_t u, int64_t i) {
  Value x;
  x.type = t;
  x.u = u;
  x.i = i;
  return x;
}
}  // namespace

Value Value::of_u8(uint8_t v) { return integer(ValueType::UINT8, v, v); }
Value Value::of_i8(int8_t v) { return integer(ValueType::INT8, v >= 0 ? uint64_t(v) : 0, v); }
Value Value::of_u16(uint16_t v) { return integer(ValueType::UINT16, v, v); }
Value Value::of_i16(int16_t v) { return integer(ValueType::INT16, v >= 0 ? uint64_t(v) : 0, v); }
Value Value::of_u32(uint32_t v) { return integer(ValueType::UINT32, v, v); }
Value Value::of_i32(int32_t v) { return integer(ValueType::INT32, v >= 0 ? uint64_t(v) : 0, v); }
Value Value::of_u64(uint64_t v) {
  return integer(ValueType::UINT64, v, v <= uint64_t(INT64_MAX) ? int64_t(v) : 0);
}
Value Value::of_i64(int64_t v) { return integer(ValueType::INT64, v >= 0 ? uint64_t(v) : 0, v); }
Value Value::of_f32(float v) {
  Value x;
  x.type = ValueType::FLOAT32;
  x.f = v;
  return x;
}
Value Value::of_f64(double v) {
  Value x;
  x.type = ValueType::FLOAT64;
  x.f = v;
  return x;
}
Value Value::of_bool(bool v) { return integer(ValueType::BOOL, v ? 1 : 0, v ? 1 : 0); }
Value Value::of_string(std::string v) {
  Value x;
  x.type = ValueType::STRING;
  x.str = std::move(v);
  return x;
}
Value Value::of_array(ValueType element_type, std::vector<Value> elements) {
  Value x;
  x.type = ValueType::ARRAY;
  x.array_type = element_type;
  x.array = std::move(elements);
  return x;
}

}  // namespace ember::gguf
