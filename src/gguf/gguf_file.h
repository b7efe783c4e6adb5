#pragma once
// GGUF v2/v3 reader. The file is memory-mapped; metadata is parsed eagerly with every count,
// length and offset checked against the file before use, so a hostile file produces one
// Error line (file, field, expected, found) and never a crash, hang or huge allocation.
// Byte layout and the rules a reader enforces: docs/formats/gguf.md.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <map>
#include <utility>
#include <vector>

#include "gguf/types.h"
#include "util/mapped_file.h"

namespace ember::gguf {

enum class ValueType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
const char* value_type_name(ValueType t);

// One metadata value. Scalars live in the matching member; ARRAY holds `array_type` and
// `array` (nested arrays allowed).
struct Value {
  ValueType type = ValueType::UINT8;
  uint64_t u = 0;   // UINT8..UINT64, BOOL
  int64_t i = 0;    // INT8..INT64 (also mirrored into u when non-negative)
  double f = 0;     // FLOAT32, FLOAT64
  std::string str;  // STRING
  ValueType array_type = ValueType::UINT8;
  std::vector<Value> array;

  bool is_integer() const;
  bool is_float() const { return type == ValueType::FLOAT32 || type == ValueType::FLOAT64; }

  // Constructors for writers and tests.
  static Value of_u8(uint8_t v);
  static Value of_i8(int8_t v);
  static Value of_u16(uint16_t v);
  static Value of_i16(int16_t v);
  static Value of_u32(uint32_t v);
  static Value of_i32(int32_t v);
  static Value of_u64(uint64_t v);
  static Value of_i64(int64_t v);
  static Value of_f32(float v);
  static Value of_f64(double v);
  static Value of_bool(bool v);
  static Value of_string(std::string v);
  static Value of_array(ValueType element_type, std::vector<Value> elements);

  // Conversions that throw Error (naming `key`) when the value is not of a fitting type.
  int64_t as_int(std::string_view key) const;
  double as_float(std::string_view key) const;
  const std::string& as_string(std::string_view key) const;
};

struct TensorInfo {
  std::string name;
  std::vector<uint64_t> shape;  // GGML order: shape[0] is the contiguous row length
  TensorType type = TensorType::F32;
  uint64_t offset = 0;   // relative to the start of the data section
  uint64_t n_bytes = 0;  // exact payload size implied by type and shape
  const uint8_t* data = nullptr;  // into the mapping (valid while the GgufFile lives)

  uint64_t n_elements() const;
  uint64_t row_length() const { return shape.empty() ? 1 : shape[0]; }
  uint64_t n_rows() const { return row_length() ? n_elements() / row_length() : 0; }
};

// Limits a reader enforces beyond "fits in the file" (docs/formats/gguf.md).
inline constexpr int kMaxArrayDepth = 8;   // an array inside an array inside ... (8 levels)
inline constexpr uint32_t kMaxDims = 4;    // GGML_MAX_DIMS
inline constexpr uint64_t kDefaultAlignment = 32;

// An immutable parsed file. Copies are cheap and share the mapping; TensorInfo::data stays
// valid while any copy lives. Thread-safe for concurrent reads.
class GgufFile {
 public:
  // Maps and parses a file. Throws Error on any violation (see docs/formats/gguf.md).
  static GgufFile open(const std::string& path);
  // Parses an in-memory image (fuzzing, tests). `name` is used in error messages.
  static GgufFile parse(std::shared_ptr<const std::vector<uint8_t>> bytes, std::string name);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return size_; }

  // Metadata in file order.
  const std::vector<std::pair<std::string, Value>>& metadata() const { return metadata_; }
  const Value* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }
  // Typed getters: throw Error naming the file and key if missing or of the wrong type.
  int64_t get_int(std::string_view key) const;
  double get_float(std::string_view key) const;
  bool get_bool(std::string_view key) const;
  const std::string& get_string(std::string_view key) const;
  std::vector<std::string> get_string_array(std::string_view key) const;
  std::vector<float> get_float_array(std::string_view key) const;
  std::vector<int64_t> get_int_array(std::string_view key) const;
  // Optional variants: fallback when the key is absent (wrong type still throws).
  int64_t get_int_or(std::string_view key, int64_t fallback) const;
  double get_float_or(std::string_view key, double fallback) const;
  bool get_bool_or(std::string_view key, bool fallback) const;
  std::string get_string_or(std::string_view key, std::string fallback) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;
  const TensorInfo& tensor(std::string_view name) const;  // Error naming file and tensor

 private:
  GgufFile() = default;
  void parse_all(const uint8_t* data, size_t size);
  const Value& require(std::string_view key) const;
  std::string path_;
  std::shared_ptr<const MappedFile> mapping_;
  std::shared_ptr<const std::vector<uint8_t>> buffer_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  uint64_t size_ = 0;
  std::vector<std::pair<std::string, Value>> metadata_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> metadata_index_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace ember::gguf
