#pragma once
// KVC1: a single-file, fail-closed KV cache container (docs/formats/kvc1.md).
//
//   [preamble 32 B][header: canonical JSON][pad 8][tensor table 80 B x 2L][pad 64]
//   [payload L0.K][pad 64][payload L0.V] ... [payload L(L-1).V][pad 64][trailer SHA-256]
//
// A payload is one layer's K or V, [kv_head][position][head_dim] of `dtype`. The header is
// {"artifact":{"kind":K},"format":"ember.kvc1","state":{...the state's manifest...}}; the kind
// is also the preamble's byte 28 (version 2), and the two must agree. Both are under the
// trailer hash.
// Writing streams each tensor from its source twice (hash, then write) and never buffers the
// cache; reading maps the file and verifies every byte before handing out views.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/byte_io.h"
#include "util/error.h"
#include "util/mapped_file.h"
#include "kv/state.h"
#include "util/sha256.h"

namespace ember::kv {

inline constexpr char kKvc1Magic[4] = {'K', 'V', 'C', '1'};
inline constexpr uint16_t kKvc1Version = 2;  // 2: the kind byte (version 1 had none)
inline constexpr const char* kKvc1Format = "ember.kvc1";
inline constexpr uint64_t kKvc1PreambleBytes = 32;
inline constexpr uint64_t kKvc1EntryBytes = 80;
inline constexpr uint64_t kKvc1Alignment = 64;
inline constexpr uint64_t kKvc1MaxHeaderBytes = uint64_t(64) << 20;
// JSON values a header may hold: a snapshot manifest's (kMaxManifestValues) plus room for a
// mapped artifact's provenance. Bounds the parsed DOM, not only the text.
inline constexpr size_t kKvc1MaxHeaderValues = kMaxManifestValues + 65536;
inline constexpr uint32_t kKvc1MaxTensors = 2 * 1024;

// What a container holds: preamble byte 28 and header artifact.kind, which must agree. A further
// kind is one more value here and one more row in kKvc1Kinds (its state's rules live with the
// reader that loads it: kvc1_snapshot.h for the snapshot-manifest kinds).
enum class Kvc1Kind : uint8_t {
  native = 1,  // produced by the model its state names (ember.kv-snapshot)
  mapped = 2,  // authored by a translator (ember.kv-mapped: the manifest's "mapping" extension)
  foreign = 3,  // read from another engine's state (ember.kv-foreign: the "foreign" extension)
};
struct Kvc1KindInfo {
  Kvc1Kind kind;
  const char* name;  // artifact.kind
};
inline constexpr Kvc1KindInfo kKvc1Kinds[] = {
    {Kvc1Kind::native, "native"}, {Kvc1Kind::mapped, "mapped"}, {Kvc1Kind::foreign, "foreign"}};
const char* kvc1_kind_name(Kvc1Kind k);  // "native" | "mapped" | "foreign"
// "native|mapped|foreign": the names of kKvc1Kinds, for error messages.
std::string kvc1_kind_names();

enum class Kvc1Dtype : uint8_t { f16 = 1, bf16 = 2, f32 = 3 };
const char* kvc1_dtype_name(Kvc1Dtype d);  // "f16" | "bf16" | "f32"
uint64_t kvc1_dtype_size(Kvc1Dtype d);
// "f16" -> Kvc1Dtype::f16; Error naming `where`/`field` for anything else.
Kvc1Dtype parse_kvc1_dtype(const std::string& name, const std::string& where, const std::string& field);

// The named rejections of docs/formats/kvc1.md, in check order.
enum class Kvc1Reject {
  truncated, trailing_bytes, bad_magic, unsupported_version, unknown_flag, unknown_kind, nonzero_reserved,
  bad_header, non_canonical_header, bad_table, unknown_dtype, bad_length, misaligned_offset,
  offset_out_of_range, overlapping_tensors, non_canonical_layout, nonzero_padding,
  tensor_hash_mismatch, state_hash_mismatch, trailer_hash_mismatch,
};
const char* kvc1_reject_name(Kvc1Reject r);  // "unknown-dtype", ...

// An ember::Error that also carries which rule refused the file. Message:
// "<path>: [<name>] <field>: expected <e>, found <f>".
class Kvc1Error : public Error {
 public:
  Kvc1Error(Kvc1Reject code, const std::string& message) : Error(message), code_(code) {}
  Kvc1Reject code() const { return code_; }

 private:
  Kvc1Reject code_;
};

struct Kvc1TensorInfo {
  uint32_t layer = 0;
  bool is_value = false;  // false: K, true: V
  Kvc1Dtype dtype = Kvc1Dtype::f16;
  uint64_t shape[3] = {0, 0, 0};  // [kv_heads, positions, head_dim]
  uint64_t offset = 0;
  uint64_t length = 0;
  Digest sha256{};
};

// What the writer streams: shape and dtype, and a function that writes exactly
// product(shape) x dtype size bytes into a sink. emit is called twice (hash pass, write pass)
// and must produce the same bytes both times (checked: the write is refused otherwise).
struct Kvc1TensorSource {
  uint32_t layer = 0;
  bool is_value = false;
  Kvc1Dtype dtype = Kvc1Dtype::f16;
  uint64_t shape[3] = {0, 0, 0};
  std::function<void(ByteSink&)> emit;
};

// Canonical layout offsets for a header of `header_bytes` and these tensor lengths:
// returns the payload offsets, and the file length through *file_length.
std::vector<uint64_t> kvc1_layout(uint64_t header_bytes, const std::vector<uint64_t>& lengths,
                                  uint64_t* file_length);

// Writes a KVC1 image to `out` (tests, fuzz seeds) / atomically to `path` (refuses to
// overwrite without force). `header` must be an object with format, artifact and state;
// tensors in table order (layer 0 K, layer 0 V, layer 1 K, ...). Returns the trailer digest.
Digest write_kvc1(ByteSink& out, const nlohmann::json& header,
                  const std::vector<Kvc1TensorSource>& tensors, const std::string& where);
Digest write_kvc1_file(const std::string& path, const nlohmann::json& header,
                       const std::vector<Kvc1TensorSource>& tensors, bool force);

// A verified KVC1 file. open()/parse() run every check of docs/formats/kvc1.md except the
// state-hash check (which needs the snapshot manifest's semantics: kvc1_snapshot.h) and throw
// Kvc1Error on the first failure. Tensor views stay valid while the Kvc1File lives.
class Kvc1File {
 public:
  static Kvc1File open(const std::string& path);
  static Kvc1File parse(std::shared_ptr<const std::vector<uint8_t>> bytes, std::string name);

  const std::string& path() const { return path_; }
  const nlohmann::json& header() const { return header_; }
  const nlohmann::json& state() const { return header_["state"]; }
  Kvc1Kind kind() const { return kind_; }
  std::string artifact_kind() const { return kvc1_kind_name(kind_); }  // native | mapped
  uint64_t file_length() const { return size_; }
  const Digest& trailer() const { return trailer_; }
  const std::vector<Kvc1TensorInfo>& tensors() const { return tensors_; }
  const uint8_t* tensor_data(size_t i) const { return data_ + tensors_.at(i).offset; }
  int layers() const { return int(tensors_.size() / 2); }

 private:
  Kvc1File() = default;
  void verify_all();
  std::string path_;
  std::shared_ptr<const MappedFile> mapping_;
  std::shared_ptr<const std::vector<uint8_t>> buffer_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  nlohmann::json header_;
  Kvc1Kind kind_ = Kvc1Kind::native;
  std::vector<Kvc1TensorInfo> tensors_;
  Digest trailer_{};
};

}  // namespace ember::kv
