#include "util/safetensors.h"

#include <algorithm>
#include <cstring>

#include <nlohmann/json.hpp>

#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json_fields.h"
#include "util/json_strict.h"

namespace ember::safetensors {

using nlohmann::json;

namespace {

struct DtypeRow {
  Dtype d;
  const char* name;
  size_t size;
};
constexpr DtypeRow kDtypes[] = {
    {Dtype::f64, "F64", 8},  {Dtype::f32, "F32", 4}, {Dtype::f16, "F16", 2}, {Dtype::bf16, "BF16", 2},
    {Dtype::i64, "I64", 8},  {Dtype::i32, "I32", 4}, {Dtype::i16, "I16", 2}, {Dtype::i8, "I8", 1},
    {Dtype::u64, "U64", 8},  {Dtype::u32, "U32", 4}, {Dtype::u16, "U16", 2}, {Dtype::u8, "U8", 1},
    {Dtype::boolean, "BOOL", 1},
};

std::string short_json(const json& j) {
  std::string s = j.dump();
  return s.size() > 120 ? s.substr(0, 117) + "..." : s;
}

uint64_t read_u64(const json& j, const std::string& where, const std::string& field) {
  if (!j.is_number_unsigned() && !(j.is_number_integer() && j.get<int64_t>() >= 0))
    fail_field(where, field, "a non-negative integer", short_json(j));
  return j.get<uint64_t>();
}

}  // namespace

const char* dtype_name(Dtype d) {
  for (const auto& r : kDtypes)
    if (r.d == d) return r.name;
  return "?";
}

size_t dtype_size(Dtype d) {
  for (const auto& r : kDtypes)
    if (r.d == d) return r.size;
  return 0;
}

uint64_t TensorInfo::elements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;  // bounded by the reader (2^40)
  return n;
}

const TensorInfo* Header::find(const std::string& name) const {
  auto it = std::lower_bound(tensors.begin(), tensors.end(), name,
                             [](const TensorInfo& t, const std::string& n) { return t.name < n; });
  return it != tensors.end() && it->name == name ? &*it : nullptr;
}

Header parse_header(std::span<const uint8_t> file, const std::string& where) {
  if (file.size() < 8) fail_field(where, "header length", "8 bytes", "a " + std::to_string(file.size()) + "-byte file");
  uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  if (n < 2 || n > kMaxHeader)
    fail_field(where, "header length", "2.." + std::to_string(kMaxHeader), std::to_string(n));
  if (n > file.size() - 8)
    fail_field(where, "header length", "at most " + std::to_string(file.size() - 8) + " (the bytes after it)",
               std::to_string(n));
  const std::string_view text(reinterpret_cast<const char*>(file.data()) + 8, size_t(n));
  if (text.front() != '{') fail_field(where, "header", "a JSON object starting with '{'", "other bytes");
  // Each value of the header takes at least one byte of text; kMaxHeaderValues bounds the memory.
  const json h = parse_json_strict(text, where + ": header", 4, std::min(size_t(n) + 1, kMaxHeaderValues));
  if (!h.is_object()) fail_field(where, "header", "a JSON object", json_type_name(h));
  Header out;
  out.data_start = 8 + n;
  const uint64_t data_size = file.size() - out.data_start;
  for (const auto& [name, e] : h.items()) {
    if (name == "__metadata__") {
      if (!e.is_object()) fail_field(where, "__metadata__", "an object of strings", json_type_name(e));
      for (const auto& [k, v] : e.items()) {
        if (!v.is_string()) fail_field(where, "__metadata__." + k, "a string", json_type_name(v));
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string f = "tensor \"" + name + "\"";
    if (!e.is_object() || e.size() != 3 || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
      fail_field(where, f, "an object with exactly dtype, shape and data_offsets", short_json(e));
    TensorInfo t;
    t.name = name;
    const json& dt = e["dtype"];
    const DtypeRow* row = nullptr;
    if (dt.is_string())
      for (const auto& r : kDtypes)
        if (dt.get<std::string>() == r.name) row = &r;
    if (!row)
      fail_field(where, f + ".dtype", "F64|F32|F16|BF16|I64|I32|I16|I8|U64|U32|U16|U8|BOOL", short_json(dt));
    t.dtype = row->d;
    const json& shape = e["shape"];
    if (!shape.is_array() || shape.size() > size_t(kMaxDims))
      fail_field(where, f + ".shape", "an array of at most 8 dimensions", short_json(shape));
    uint64_t count = 1;
    for (size_t i = 0; i < shape.size(); ++i) {
      const uint64_t d = read_u64(shape[i], where, f + ".shape[" + std::to_string(i) + "]");
      if (d != 0 && count > (uint64_t(1) << 40) / d)
        fail_field(where, f + ".shape", "at most 2^40 elements", short_json(shape));
      count *= d;
      t.shape.push_back(d);
    }
    const json& off = e["data_offsets"];
    if (!off.is_array() || off.size() != 2)
      fail_field(where, f + ".data_offsets", "[begin, end]", short_json(off));
    const uint64_t b = read_u64(off[0], where, f + ".data_offsets[0]");
    const uint64_t en = read_u64(off[1], where, f + ".data_offsets[1]");
    if (b > en || en > data_size)
      fail_field(where, f + ".data_offsets",
                 "begin <= end <= " + std::to_string(data_size) + " (the data buffer)",
                 "[" + std::to_string(b) + ", " + std::to_string(en) + "]");
    const uint64_t bytes = count * row->size;
    if (en - b != bytes)
      fail_field(where, f + ".data_offsets",
                 std::to_string(bytes) + " bytes (" + row->name + " " + shape.dump() + ")",
                 std::to_string(en - b) + " bytes");
    t.begin = out.data_start + b;
    t.end = out.data_start + en;
    out.tensors.push_back(std::move(t));
  }
  // nlohmann's object is sorted by key: tensors are in name order. Coverage by offset.
  std::vector<const TensorInfo*> by_offset;
  for (const auto& t : out.tensors) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t pos = out.data_start;
  for (const TensorInfo* t : by_offset) {
    const std::string f = "tensor \"" + t->name + "\".data_offsets";
    if (t->begin < pos)
      fail_field(where, f, "begin >= " + std::to_string(pos - out.data_start) + " (tensors must not overlap)",
                 std::to_string(t->begin - out.data_start));
    if (t->begin > pos)
      fail_field(where, f, "begin " + std::to_string(pos - out.data_start) + " (no hole in the data buffer)",
                 std::to_string(t->begin - out.data_start));
    pos = t->end;
  }
  if (pos != file.size())
    fail_field(where, "file size", std::to_string(pos) + " bytes (the end of the last tensor)",
               std::to_string(file.size()));
  return out;
}

File File::open(const std::string& path) {
  File f;
  f.map_ = MappedFile::open(path);
  f.header_ = parse_header({f.map_->data(), f.map_->size()}, path);
  return f;
}

void write(ByteSink& out, const std::vector<OutTensor>& tensors, const std::map<std::string, std::string>& metadata,
           const std::string& where) {
  json h = json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  uint64_t pos = 0;
  for (const auto& t : tensors) {
    if (t.name == "__metadata__" || h.contains(t.name))
      fail_field(where, "tensor \"" + t.name + "\"", "a unique tensor name", "a duplicate or reserved name");
    uint64_t n = dtype_size(t.dtype);
    for (uint64_t d : t.shape) n *= d;
    h[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {pos, pos + n}}};
    pos += n;
  }
  std::string text = h.dump();
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');
  out.write_le<uint64_t>(text.size());
  out.write(text);
  for (const auto& t : tensors) {
    const uint64_t start = out.n_bytes();
    t.write(out);
    uint64_t n = dtype_size(t.dtype);
    for (uint64_t d : t.shape) n *= d;
    if (out.n_bytes() - start != n)
      fail_field(where, "tensor \"" + t.name + "\"", std::to_string(n) + " bytes written",
                 std::to_string(out.n_bytes() - start));
  }
}

void write_file(const std::string& path, const std::vector<OutTensor>& tensors,
                const std::map<std::string, std::string>& metadata, bool force) {
  AtomicFile f(path, force);
  write(f.sink(), tensors, metadata, path);
  f.commit();
}

}  // namespace ember::safetensors
