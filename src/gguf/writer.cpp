#include "gguf/writer.h"

#include <algorithm>

#include "util/atomic_file.h"
#include "util/error.h"

namespace ember::gguf {
namespace {

constexpr const char* kWhere = "gguf writer";

// Collects small writes into large chunks: an AtomicFile sink issues one syscall per write.
class ChunkedSink final : public ByteSink {
 public:
  explicit ChunkedSink(ByteSink& inner) : inner_(inner) { buf_.reserve(kChunk); }
  void write(const void* data, size_t n) override {
    const auto* p = static_cast<const uint8_t*>(data);
    n_bytes_ += n;
    if (buf_.size() + n > kChunk) flush();
    if (n >= kChunk) {
      inner_.write(p, n);
      return;
    }
    buf_.insert(buf_.end(), p, p + n);
  }
  using ByteSink::write;
  void flush() {
    if (!buf_.empty()) inner_.write(buf_.data(), buf_.size());
    buf_.clear();
  }

 private:
  static constexpr size_t kChunk = size_t(1) << 20;
  ByteSink& inner_;
  std::vector<uint8_t> buf_;
};

// Forwards and counts, so a producer that writes the wrong amount is caught.
class CountedForward final : public ByteSink {
 public:
  explicit CountedForward(ByteSink& inner) : inner_(inner) {}
  void write(const void* data, size_t n) override {
    inner_.write(data, n);
    n_bytes_ += n;
  }
  using ByteSink::write;

 private:
  ByteSink& inner_;
};

void write_string(ByteSink& out, std::string_view s) {
  out.write_le<uint64_t>(s.size());
  out.write(s);
}

void write_payload(ByteSink& out, const Value& v, std::string_view key) {
  switch (v.type) {
    case ValueType::UINT8: out.write_le<uint8_t>(uint8_t(v.u)); break;
    case ValueType::INT8: out.write_le<int8_t>(int8_t(v.i)); break;
    case ValueType::UINT16: out.write_le<uint16_t>(uint16_t(v.u)); break;
    case ValueType::INT16: out.write_le<int16_t>(int16_t(v.i)); break;
    case ValueType::UINT32: out.write_le<uint32_t>(uint32_t(v.u)); break;
    case ValueType::INT32: out.write_le<int32_t>(int32_t(v.i)); break;
    case ValueType::UINT64: out.write_le<uint64_t>(v.u); break;
    case ValueType::INT64: out.write_le<int64_t>(v.i); break;
    case ValueType::FLOAT32: out.write_le<float>(float(v.f)); break;
    case ValueType::FLOAT64: out.write_le<double>(v.f); break;
    case ValueType::BOOL: out.write_le<uint8_t>(v.u ? 1 : 0); break;
    case ValueType::STRING: write_string(out, v.str); break;
    case ValueType::ARRAY:
      out.write_le<uint32_t>(uint32_t(v.array_type));
      out.write_le<uint64_t>(v.array.size());
      for (const Value& e : v.array) {
        if (e.type != v.array_type)
          fail_field(kWhere, "metadata '" + std::string(key) + "' element",
                     std::string("type ") + value_type_name(v.array_type),
                     value_type_name(e.type));
        write_payload(out, e, key);
      }
      break;
  }
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace

void GgufWriter::set(std::string key, Value value) {
  if (key.empty()) fail_field(kWhere, "metadata key", "a non-empty key", "an empty string");
  if (key == "general.alignment") {
    if (value.type != ValueType::UINT32 || value.u == 0 || (value.u & (value.u - 1)) != 0)
      fail_field(kWhere, "metadata 'general.alignment'", "a uint32 power of two",
                 std::string(value_type_name(value.type)) + " " + std::to_string(value.u));
    alignment_ = value.u;
  }
  for (auto& kv : metadata_) {
    if (kv.first == key) {
      kv.second = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(std::move(key), std::move(value));
}

void GgufWriter::set_u32(std::string key, uint32_t v) { set(std::move(key), Value::of_u32(v)); }
void GgufWriter::set_i32(std::string key, int32_t v) { set(std::move(key), Value::of_i32(v)); }
void GgufWriter::set_u64(std::string key, uint64_t v) { set(std::move(key), Value::of_u64(v)); }
void GgufWriter::set_f32(std::string key, float v) { set(std::move(key), Value::of_f32(v)); }
void GgufWriter::set_bool(std::string key, bool v) { set(std::move(key), Value::of_bool(v)); }
void GgufWriter::set_string(std::string key, std::string v) {
  set(std::move(key), Value::of_string(std::move(v)));
}
void GgufWriter::set_string_array(std::string key, const std::vector<std::string>& v) {
  std::vector<Value> a;
  a.reserve(v.size());
  for (const auto& s : v) a.push_back(Value::of_string(s));
  set(std::move(key), Value::of_array(ValueType::STRING, std::move(a)));
}
void GgufWriter::set_f32_array(std::string key, const std::vector<float>& v) {
  std::vector<Value> a;
  a.reserve(v.size());
  for (float x : v) a.push_back(Value::of_f32(x));
  set(std::move(key), Value::of_array(ValueType::FLOAT32, std::move(a)));
}
void GgufWriter::set_i32_array(std::string key, const std::vector<int32_t>& v) {
  std::vector<Value> a;
  a.reserve(v.size());
  for (int32_t x : v) a.push_back(Value::of_i32(x));
  set(std::move(key), Value::of_array(ValueType::INT32, std::move(a)));
}

void GgufWriter::remove(std::string_view key) {
  if (key == "general.alignment") alignment_ = kDefaultAlignment;
  metadata_.erase(std::remove_if(metadata_.begin(), metadata_.end(),
                                 [&](const auto& kv) { return kv.first == key; }),
                  metadata_.end());
}

void GgufWriter::copy_metadata(const GgufFile& from) {
  for (const auto& [k, v] : from.metadata()) set(k, v);
}

void GgufWriter::set_alignment(uint64_t a) {
  if (a == 0 || (a & (a - 1)) != 0 || a > UINT32_MAX)
    fail_field(kWhere, "alignment", "a power of two < 2^32", std::to_string(a));
  set_u32("general.alignment", uint32_t(a));
}

uint64_t GgufWriter::check_tensor(const std::string& name, const std::vector<uint64_t>& shape,
                                  TensorType type) const {
  const std::string field = "tensor '" + name + "'";
  if (name.empty()) fail_field(kWhere, "tensor name", "a non-empty name", "an empty string");
  for (const auto& t : tensors_)
    if (t.name == name) fail_field(kWhere, field, "a unique tensor name", "a duplicate");
  if (shape.empty() || shape.size() > kMaxDims)
    fail_field(kWhere, field + ".shape", "1..4 dims", std::to_string(shape.size()));
  const auto tr = type_traits(uint32_t(type));
  if (!tr) fail_field(kWhere, field + ".type", "a GGML type", type_name(uint32_t(type)));
  uint64_t n = 1;
  for (uint64_t d : shape) {
    if (d == 0 || __builtin_mul_overflow(n, d, &n) || n > uint64_t(INT64_MAX))
      fail_field(kWhere, field + ".shape", "dims >= 1 with a product <= 2^63-1",
                 "dim " + std::to_string(d));
  }
  if (shape[0] % tr->block_elems != 0)
    fail_field(kWhere, field + ".shape[0]",
               "a multiple of " + std::to_string(tr->block_elems) + " for " + tr->name,
               std::to_string(shape[0]));
  return shape[0] / tr->block_elems * tr->block_bytes * (n / shape[0]);
}

void GgufWriter::add_tensor(std::string name, std::vector<uint64_t> shape, TensorType type,
                            std::vector<uint8_t> bytes) {
  const uint64_t n_bytes = check_tensor(name, shape, type);
  if (bytes.size() != n_bytes)
    fail_field(kWhere, "tensor '" + name + "' data", std::to_string(n_bytes) + " bytes",
               std::to_string(bytes.size()) + " bytes");
  tensors_.push_back({std::move(name), std::move(shape), type, n_bytes, std::move(bytes), {}});
}

void GgufWriter::add_tensor(std::string name, std::vector<uint64_t> shape, TensorType type,
                            TensorProducer produce) {
  EMBER_CHECK(produce != nullptr);
  const uint64_t n_bytes = check_tensor(name, shape, type);
  tensors_.push_back({std::move(name), std::move(shape), type, n_bytes, {}, std::move(produce)});
}

void GgufWriter::write(ByteSink& sink) const {
  ChunkedSink out(sink);
  // Header and metadata.
  out.write("GGUF");
  out.write_le<uint32_t>(3);
  out.write_le<uint64_t>(tensors_.size());
  out.write_le<uint64_t>(metadata_.size());
  for (const auto& [key, value] : metadata_) {
    write_string(out, key);
    out.write_le<uint32_t>(uint32_t(value.type));
    write_payload(out, value, key);
  }
  // Tensor infos: offsets relative to the data section, each aligned.
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    write_string(out, t.name);
    out.write_le<uint32_t>(uint32_t(t.shape.size()));
    for (uint64_t d : t.shape) out.write_le<uint64_t>(d);
    out.write_le<uint32_t>(uint32_t(t.type));
    out.write_le<uint64_t>(offset);
    offset = align_up(offset + t.n_bytes, alignment_);
  }
  out.write_zeros(size_t(align_up(out.n_bytes(), alignment_) - out.n_bytes()));
  // Data.
  for (const auto& t : tensors_) {
    if (t.produce) {
      CountedForward counted(out);
      t.produce(counted);
      if (counted.n_bytes() != t.n_bytes)
        fail_field(kWhere, "tensor '" + t.name + "' data", std::to_string(t.n_bytes) + " bytes",
                   std::to_string(counted.n_bytes()) + " bytes from its producer");
    } else {
      out.write(t.bytes.data(), t.bytes.size());
    }
    out.write_zeros(size_t(align_up(t.n_bytes, alignment_) - t.n_bytes));
  }
  out.flush();
}

void GgufWriter::write_file(const std::string& path, bool force) const {
  AtomicFile file(path, force);
  write(file.sink());
  file.commit();
}

}  // namespace ember::gguf
