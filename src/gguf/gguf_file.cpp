// GGUF v2/v3 parser. Order of checks follows the byte layout (docs/formats/gguf.md):
// header, metadata, tensor infos, then the data section. Every count and length is checked
// against the bytes that remain BEFORE anything is allocated from it, so the memory used is
// bounded by a small multiple of the file size whatever the file claims.
#include "gguf/gguf_file.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "util/byte_io.h"
#include "util/error.h"

namespace ember::gguf {
namespace {

// Smallest encoding of one element of each value type, used to bound counts by the bytes
// that remain: a count of 2^60 strings fails before any allocation.
uint64_t min_encoded_size(ValueType t) {
  switch (t) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::BOOL: return 1;
    case ValueType::UINT16: case ValueType::INT16: return 2;
    case ValueType::UINT32: case ValueType::INT32: case ValueType::FLOAT32: return 4;
    case ValueType::UINT64: case ValueType::INT64: case ValueType::FLOAT64: return 8;
    case ValueType::STRING: return 8;   // u64 length
    case ValueType::ARRAY: return 12;   // u32 type + u64 count
  }
  return 1;
}

bool valid_value_type(uint32_t t) { return t <= uint32_t(ValueType::FLOAT64); }

std::string quoted_name(std::string_view s) {
  // Names come from the file: keep the message one line and bounded.
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < 96; ++i) {
    const unsigned char c = uint8_t(s[i]);
    if (c < 0x20 || c == 0x7f) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += char(c);
    }
  }
  if (s.size() > 96) out += "...";
  return out + "'";
}

std::string hex_bytes(const uint8_t* p, size_t n) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    if (i) out += ' ';
    out += hex[p[i] >> 4];
    out += hex[p[i] & 15];
  }
  return out;
}

class Parser {
 public:
  Parser(const std::string& where, const uint8_t* data, size_t size)
      : where_(where), r_(data, size, where) {}

  ByteReader& reader() { return r_; }

  std::string read_string(std::string_view field) {
    const uint64_t len = r_.read_le<uint64_t>(field);
    if (len > r_.remaining())
      fail_field(where_, field,
                 "a string length <= " + std::to_string(r_.remaining()) + " (bytes left in file)",
                 std::to_string(len));
    const uint8_t* p = r_.take(size_t(len), field);
    return std::string(reinterpret_cast<const char*>(p), size_t(len));
  }

  // Checks that `count` elements of at least `min_size` bytes each can fit in what remains.
  void check_count(std::string_view field, uint64_t count, uint64_t min_size,
                   std::string_view what) {
    const uint64_t fit = r_.remaining() / min_size;
    if (count > fit)
      fail_field(where_, field,
                 "at most " + std::to_string(fit) + " " + std::string(what) + " (" +
                     std::to_string(r_.remaining()) + " bytes left, >= " +
                     std::to_string(min_size) + " each)",
                 std::to_string(count));
  }

  Value read_value(ValueType type, int depth, std::string_view field) {
    Value v;
    v.type = type;
    switch (type) {
      case ValueType::UINT8: v.u = r_.read_le<uint8_t>(field); v.i = int64_t(v.u); break;
      case ValueType::UINT16: v.u = r_.read_le<uint16_t>(field); v.i = int64_t(v.u); break;
      case ValueType::UINT32: v.u = r_.read_le<uint32_t>(field); v.i = int64_t(v.u); break;
      case ValueType::UINT64:
        v.u = r_.read_le<uint64_t>(field);
        v.i = v.u <= uint64_t(INT64_MAX) ? int64_t(v.u) : 0;
        break;
      case ValueType::INT8: v.i = r_.read_le<int8_t>(field); break;
      case ValueType::INT16: v.i = r_.read_le<int16_t>(field); break;
      case ValueType::INT32: v.i = r_.read_le<int32_t>(field); break;
      case ValueType::INT64: v.i = r_.read_le<int64_t>(field); break;
      case ValueType::FLOAT32: v.f = r_.read_le<float>(field); break;
      case ValueType::FLOAT64: v.f = r_.read_le<double>(field); break;
      case ValueType::BOOL: {
        const uint8_t b = r_.read_le<uint8_t>(field);
        if (b > 1) fail_field(where_, field, "a bool byte 0 or 1", std::to_string(b));
        v.u = b;
        v.i = b;
        break;
      }
      case ValueType::STRING: v.str = read_string(field); break;
      case ValueType::ARRAY: {
        if (depth >= kMaxArrayDepth)
          fail_field(where_, field,
                     "arrays nested at most " + std::to_string(kMaxArrayDepth) + " deep",
                     "a deeper array");
        const uint32_t et = r_.read_le<uint32_t>(field);
        if (!valid_value_type(et))
          fail_field(where_, field, "an array element type 0..12", std::to_string(et));
        v.array_type = ValueType(et);
        const uint64_t n = r_.read_le<uint64_t>(field);
        check_count(field, n, min_encoded_size(v.array_type), "array elements");
        v.array.reserve(size_t(n));
        for (uint64_t k = 0; k < n; ++k) v.array.push_back(read_value(v.array_type, depth + 1, field));
        break;
      }
    }
    const bool is_signed = type == ValueType::INT8 || type == ValueType::INT16 ||
                           type == ValueType::INT32 || type == ValueType::INT64;
    if (is_signed && v.i >= 0) v.u = uint64_t(v.i);  // mirrored, as Value documents
    return v;
  }

 private:
  const std::string& where_;
  ByteReader r_;
};

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace

uint64_t TensorInfo::n_elements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;  // checked against overflow when parsed
  return n;
}

GgufFile GgufFile::open(const std::string& path) {
  GgufFile f;
  f.path_ = path;
  f.mapping_ = MappedFile::open(path);
  f.parse_all(f.mapping_->data(), f.mapping_->size());
  return f;
}

GgufFile GgufFile::parse(std::shared_ptr<const std::vector<uint8_t>> bytes, std::string name) {
  EMBER_CHECK(bytes != nullptr);
  GgufFile f;
  f.path_ = std::move(name);
  f.buffer_ = std::move(bytes);
  f.parse_all(f.buffer_->data(), f.buffer_->size());
  return f;
}

void GgufFile::parse_all(const uint8_t* data, size_t size) {
  size_ = size;
  Parser p(path_, data, size);
  ByteReader& r = p.reader();

  // Header: magic, version, counts.
  const uint8_t* magic = r.take(4, "header.magic");
  if (std::memcmp(magic, "GGUF", 4) != 0)
    fail_field(path_, "header.magic", "\"GGUF\" (47 47 55 46)", hex_bytes(magic, 4));
  version_ = r.read_le<uint32_t>("header.version");
  if (version_ != 2 && version_ != 3)
    fail_field(path_, "header.version", "2 or 3",
               std::to_string(version_) + (version_ == 1 ? " (GGUF v1, 32-bit counts)" : ""));
  const uint64_t n_tensors = r.read_le<uint64_t>("header.tensor_count");
  const uint64_t n_kv = r.read_le<uint64_t>("header.metadata_kv_count");
  // One metadata entry takes >= 14 bytes (u64 key length, 1 key byte, u32 type, 1 value byte),
  // one tensor info >= 33 (u64 name length, 1 byte, u32 n_dims, u64 dim, u32 type, u64 offset).
  p.check_count("header.metadata_kv_count", n_kv, 14, "metadata entries");
  p.check_count("header.tensor_count", n_tensors, 33, "tensor infos");

  // Metadata.
  metadata_.reserve(size_t(n_kv));
  for (uint64_t k = 0; k < n_kv; ++k) {
    const std::string idx = "metadata[" + std::to_string(k) + "]";
    std::string key = p.read_string(idx + ".key");
    if (key.empty()) fail_field(path_, idx + ".key", "a non-empty key", "an empty string");
    const std::string field = "metadata " + quoted_name(key);
    if (metadata_index_.count(key))
      fail_field(path_, field, "unique metadata keys", "a second entry (" + idx + ")");
    const uint32_t t = r.read_le<uint32_t>(field + ".type");
    if (!valid_value_type(t))
      fail_field(path_, field + ".type", "a value type 0..12", std::to_string(t));
    Value v = p.read_value(ValueType(t), 0, field);
    metadata_index_.emplace(key, metadata_.size());
    metadata_.emplace_back(std::move(key), std::move(v));
  }

  // general.alignment: a power of two, stored as uint32 (as GGML writes it).
  if (const Value* a = find("general.alignment")) {
    if (a->type != ValueType::UINT32)
      fail_field(path_, "metadata 'general.alignment'", "type uint32", value_type_name(a->type));
    if (a->u == 0 || (a->u & (a->u - 1)) != 0)
      fail_field(path_, "metadata 'general.alignment'", "a non-zero power of two",
                 std::to_string(a->u));
    alignment_ = a->u;
  }

  // Tensor infos.
  tensors_.reserve(size_t(n_tensors));
  for (uint64_t k = 0; k < n_tensors; ++k) {
    const std::string idx = "tensor[" + std::to_string(k) + "]";
    TensorInfo t;
    t.name = p.read_string(idx + ".name");
    if (t.name.empty()) fail_field(path_, idx + ".name", "a non-empty name", "an empty string");
    const std::string field = "tensor " + quoted_name(t.name);
    if (tensor_index_.count(t.name))
      fail_field(path_, field, "unique tensor names", "a second tensor (" + idx + ")");
    const uint32_t n_dims = r.read_le<uint32_t>(field + ".n_dims");
    if (n_dims < 1 || n_dims > kMaxDims)
      fail_field(path_, field + ".n_dims", "1.." + std::to_string(kMaxDims),
                 std::to_string(n_dims));
    uint64_t n_elems = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const std::string dfield = field + ".shape[" + std::to_string(d) + "]";
      const uint64_t dim = r.read_le<uint64_t>(dfield);
      if (dim == 0 || dim > uint64_t(INT64_MAX))
        fail_field(path_, dfield, "1..2^63-1", std::to_string(dim));
      if (__builtin_mul_overflow(n_elems, dim, &n_elems) || n_elems > uint64_t(INT64_MAX))
        fail_field(path_, dfield, "an element count (product of dims) <= 2^63-1",
                   "an overflowing product");
      t.shape.push_back(dim);
    }
    const uint32_t raw_type = r.read_le<uint32_t>(field + ".type");
    const auto tr = type_traits(raw_type);
    if (!tr || !tr->supported)
      fail_field(path_, field + ".type", "a supported tensor type (" + supported_type_names() + ")",
                 type_name(raw_type) + " (type " + std::to_string(raw_type) + ")" +
                     (tr ? ", which ember does not dequantize" : ", unknown to GGML"));
    t.type = TensorType(raw_type);
    if (t.shape[0] % tr->block_elems != 0)
      fail_field(path_, field + ".shape[0]",
                 "a row length that is a multiple of " + std::to_string(tr->block_elems) +
                     " (the " + tr->name + " block size)",
                 std::to_string(t.shape[0]));
    uint64_t rb = 0;
    if (__builtin_mul_overflow(t.shape[0] / tr->block_elems, uint64_t(tr->block_bytes), &rb) ||
        __builtin_mul_overflow(rb, n_elems / t.shape[0], &t.n_bytes))
      fail_field(path_, field + ".shape", "a byte size that fits in 64 bits", "an overflow");
    t.offset = r.read_le<uint64_t>(field + ".offset");
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }

  // Data section: starts at the next multiple of the alignment after the tensor infos.
  data_offset_ = align_up(r.offset(), alignment_);
  if (!tensors_.empty() && data_offset_ > size)
    fail_field(path_, "data section",
               "to start at offset " + std::to_string(data_offset_) + " within the file",
               "a file of " + std::to_string(size) + " bytes (truncated)");
  const uint64_t data_size = data_offset_ <= size ? size - data_offset_ : 0;
  for (TensorInfo& t : tensors_) {
    const std::string field = "tensor " + quoted_name(t.name) + ".offset";
    if (t.offset % alignment_ != 0)
      fail_field(path_, field, "a multiple of the alignment " + std::to_string(alignment_),
                 std::to_string(t.offset) + " (misaligned)");
    if (t.offset > data_size || t.n_bytes > data_size - t.offset)
      fail_field(path_, field,
                 "data [" + std::to_string(t.offset) + ", +" + std::to_string(t.n_bytes) +
                     ") inside the data section of " + std::to_string(data_size) + " bytes",
                 t.offset > data_size ? "an offset past the end of the data section"
                                      : "a range running past the end of the file (truncated)");
    t.data = data + data_offset_ + t.offset;
  }
  std::vector<size_t> order(tensors_.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return tensors_[a].offset < tensors_[b].offset; });
  for (size_t k = 1; k < order.size(); ++k) {
    const TensorInfo& prev = tensors_[order[k - 1]];
    const TensorInfo& cur = tensors_[order[k]];
    if (prev.offset + prev.n_bytes > cur.offset)
      fail_field(path_, "tensor " + quoted_name(cur.name) + ".offset",
                 "data not overlapping tensor " + quoted_name(prev.name) + " [" +
                     std::to_string(prev.offset) + ", " +
                     std::to_string(prev.offset + prev.n_bytes) + ")",
                 std::to_string(cur.offset) + " (overlap)");
  }
}

// ---- lookups ----

const Value* GgufFile::find(std::string_view key) const {
  auto it = metadata_index_.find(key);
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

const Value& GgufFile::require(std::string_view key) const {
  const Value* v = find(key);
  if (!v) fail_field(path_, "metadata " + quoted_name(key), "present", "missing");
  return *v;
}

namespace {
[[noreturn]] void wrong_type(const std::string& path, std::string_view key, const char* expected,
                             const Value& v) {
  std::string found = value_type_name(v.type);
  if (v.type == ValueType::ARRAY) found += std::string(" of ") + value_type_name(v.array_type);
  fail_field(path, "metadata " + quoted_name(key), expected, found);
}
}  // namespace

int64_t GgufFile::get_int(std::string_view key) const {
  const Value& v = require(key);
  if (!v.is_integer()) wrong_type(path_, key, "an integer", v);
  if (v.type == ValueType::UINT64 && v.u > uint64_t(INT64_MAX))
    fail_field(path_, "metadata " + quoted_name(key), "an integer <= 2^63-1", std::to_string(v.u));
  return v.as_int(key);
}

double GgufFile::get_float(std::string_view key) const {
  const Value& v = require(key);
  if (!v.is_float() && !v.is_integer()) wrong_type(path_, key, "a number", v);
  return v.as_float(key);
}

bool GgufFile::get_bool(std::string_view key) const {
  const Value& v = require(key);
  if (v.type != ValueType::BOOL) wrong_type(path_, key, "bool", v);
  return v.u != 0;
}

const std::string& GgufFile::get_string(std::string_view key) const {
  const Value& v = require(key);
  if (v.type != ValueType::STRING) wrong_type(path_, key, "string", v);
  return v.str;
}

std::vector<std::string> GgufFile::get_string_array(std::string_view key) const {
  const Value& v = require(key);
  if (v.type != ValueType::ARRAY || v.array_type != ValueType::STRING)
    wrong_type(path_, key, "array of string", v);
  std::vector<std::string> out;
  out.reserve(v.array.size());
  for (const Value& e : v.array) out.push_back(e.str);
  return out;
}

std::vector<float> GgufFile::get_float_array(std::string_view key) const {
  const Value& v = require(key);
  if (v.type != ValueType::ARRAY ||
      (v.array_type != ValueType::FLOAT32 && v.array_type != ValueType::FLOAT64))
    wrong_type(path_, key, "array of float32 or float64", v);
  std::vector<float> out;
  out.reserve(v.array.size());
  for (const Value& e : v.array) out.push_back(float(e.f));
  return out;
}

std::vector<int64_t> GgufFile::get_int_array(std::string_view key) const {
  const Value& v = require(key);
  Value probe;
  probe.type = v.array_type;
  if (v.type != ValueType::ARRAY || !probe.is_integer())
    wrong_type(path_, key, "array of integers", v);
  std::vector<int64_t> out;
  out.reserve(v.array.size());
  for (const Value& e : v.array) {
    if (e.type == ValueType::UINT64 && e.u > uint64_t(INT64_MAX))
      fail_field(path_, "metadata " + quoted_name(key), "elements <= 2^63-1", std::to_string(e.u));
    out.push_back(e.type == ValueType::UINT64 ? int64_t(e.u) : e.i);
  }
  return out;
}

int64_t GgufFile::get_int_or(std::string_view key, int64_t fallback) const {
  return has(key) ? get_int(key) : fallback;
}
double GgufFile::get_float_or(std::string_view key, double fallback) const {
  return has(key) ? get_float(key) : fallback;
}
bool GgufFile::get_bool_or(std::string_view key, bool fallback) const {
  return has(key) ? get_bool(key) : fallback;
}
std::string GgufFile::get_string_or(std::string_view key, std::string fallback) const {
  return has(key) ? get_string(key) : fallback;
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& GgufFile::tensor(std::string_view name) const {
  const TensorInfo* t = find_tensor(name);
  if (!t) fail_field(path_, "tensor " + quoted_name(name), "present", "missing");
  return *t;
}

}  // namespace ember::gguf
