#pragma once
// The safetensors container (Hugging Face's tensor file format), read fail-closed and
// written atomically. Generic: KV caches (kv/safetensors_cache.h) and Hugging Face
// checkpoints (hf/) are layouts over it. docs/formats/safetensors-cache.md.
//
//   [0, 8)        u64 little-endian N: the header length
//   [8, 8 + N)    JSON header: {"NAME": {"dtype": D, "shape": [...], "data_offsets": [b, e]},
//                 ..., "__metadata__": {"key": "string", ...}} (metadata optional), padded
//                 with spaces
//   [8 + N, end)  the data buffer; a tensor's bytes are [8 + N + b, 8 + N + e), row-major,
//                 little-endian
//
// The reader refuses, naming the field: N < 2 or over 100 MiB (the reference reader's
// limit) or past the file; a header that is not one strict UTF-8 JSON object (duplicate
// keys, depth > 4, more than kMaxHeaderValues values); an entry without exactly dtype/shape/data_offsets; an unknown dtype
// (the F8/F4 types included: nothing here reads them); a shape of more than 8 dims or a
// product over 2^40 elements; offsets with begin > end or end past the buffer; a byte size
// that is not the shape's; overlapping tensors, holes between them and bytes after the last
// (the reference rule "the buffer is entirely indexed", which also keeps a file from being
// two formats at once).
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "util/byte_io.h"
#include "util/mapped_file.h"

namespace ember::safetensors {

enum class Dtype { f64, f32, f16, bf16, i64, i32, i16, i8, u64, u32, u16, u8, boolean };
const char* dtype_name(Dtype d);  // "F32", "BF16", ... as in the header
size_t dtype_size(Dtype d);

inline constexpr uint64_t kMaxHeader = uint64_t(100) << 20;
// JSON values in a header (objects, arrays, strings, numbers), counted while it is parsed and
// refused the moment the count passes this: the parsed form of a hostile header costs up to
// ~35 bytes of memory per byte of text (83 MiB of "[{},{},...]" took 2.9 GB RSS and 47 s before
// this bound; now ~100 MB and a fraction of a second, docs/reliability.md "Round 2"). A tensor
// entry is at most 14 values, a metadata entry 2, so 2^20 is some 70,000 tensors: more than any
// one checkpoint file or KV cache holds.
inline constexpr size_t kMaxHeaderValues = size_t(1) << 20;
inline constexpr int kMaxDims = 8;

struct TensorInfo {
  std::string name;
  Dtype dtype = Dtype::f32;
  std::vector<uint64_t> shape;
  uint64_t begin = 0, end = 0;  // absolute byte offsets in the file
  uint64_t elements() const;
};

// A checked header over bytes the caller keeps alive (a mapping or a buffer).
struct Header {
  std::vector<TensorInfo> tensors;  // in name order
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;
  const TensorInfo* find(const std::string& name) const;  // null when absent
};

// Every rule above; Error "<where>: <field>: expected ..., found ..." otherwise.
Header parse_header(std::span<const uint8_t> file, const std::string& where);

// A checked, memory-mapped file.
class File {
 public:
  static File open(const std::string& path);
  const Header& header() const { return header_; }
  const std::string& path() const { return map_->path(); }
  std::span<const uint8_t> bytes(const TensorInfo& t) const {
    return {map_->data() + t.begin, size_t(t.end - t.begin)};
  }
  std::span<const uint8_t> file_bytes() const { return {map_->data(), map_->size()}; }  // the whole file

 private:
  std::shared_ptr<const MappedFile> map_;
  Header header_;
};

// One tensor to write: its header entry and a writer of exactly its bytes (called once, in
// order), so nothing is concatenated in memory.
struct OutTensor {
  std::string name;
  Dtype dtype = Dtype::f32;
  std::vector<uint64_t> shape;
  std::function<void(ByteSink&)> write;
};

// Header (compact JSON, padded with spaces to a multiple of 8) then the tensors in the order
// given. Names must be unique and not "__metadata__"; a writer writing other than its size
// is an error (nothing is committed).
void write(ByteSink& out, const std::vector<OutTensor>& tensors,
           const std::map<std::string, std::string>& metadata, const std::string& where);
// The same, atomically to `path` (util/atomic_file.h: no overwrite without force).
void write_file(const std::string& path, const std::vector<OutTensor>& tensors,
                const std::map<std::string, std::string>& metadata, bool force);

}  // namespace ember::safetensors
