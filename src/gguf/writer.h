#pragma once
// GGUF v3 writer: metadata in insertion order, tensor infos, aligned tensor data. Writes
// through a ByteSink so that files, buffers and hashers share one path.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gguf/gguf_file.h"
#include "util/byte_io.h"

namespace ember::gguf {

class GgufWriter {
 public:
  void set(std::string key, Value value);  // replaces an existing key in place
  void set_u32(std::string key, uint32_t v);
  void set_i32(std::string key, int32_t v);
  void set_u64(std::string key, uint64_t v);
  void set_f32(std::string key, float v);
  void set_bool(std::string key, bool v);
  void set_string(std::string key, std::string v);
  void set_string_array(std::string key, const std::vector<std::string>& v);
  void set_f32_array(std::string key, const std::vector<float>& v);
  void set_i32_array(std::string key, const std::vector<int32_t>& v);
  // Copies every metadata entry of a file (for quantize: same metadata, new tensors).
  void copy_metadata(const GgufFile& from);

  // Adds a tensor; bytes.size() must equal the size implied by type and shape.
  void add_tensor(std::string name, std::vector<uint64_t> shape, TensorType type,
                  std::vector<uint8_t> bytes);
  void set_alignment(uint64_t a);

  void write(ByteSink& out) const;
  // Atomic write to path (refuses to overwrite without force).
  void write_file(const std::string& path, bool force) const;

 private:
  struct PendingTensor {
    std::string name;
    std::vector<uint64_t> shape;
    TensorType type;
    std::vector<uint8_t> bytes;
  };
  std::vector<std::pair<std::string, Value>> metadata_;
  std::vector<PendingTensor> tensors_;
  uint64_t alignment_ = 32;
};

}  // namespace ember::gguf
