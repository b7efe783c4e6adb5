#pragma once
// GGUF v3 writer: metadata in insertion order, tensor infos, aligned tensor data. Writes
// through a ByteSink so that files, buffers and hashers share one path. The layout is the one
// GGML's own writer produces (docs/formats/gguf.md): every tensor's data starts at a multiple
// of the alignment and is followed by zero padding up to the next multiple.
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "gguf/gguf_file.h"
#include "util/byte_io.h"

namespace ember::gguf {

class GgufWriter {
 public:
  // Produces exactly the tensor's bytes when the file is written (synth and quantize stream
  // models larger than memory this way). Writing more or fewer bytes is an Error.
  using TensorProducer = std::function<void(ByteSink& out)>;

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
  void remove(std::string_view key);  // no-op when absent
  // Copies every metadata entry of a file (for quantize: same metadata, new tensors).
  void copy_metadata(const GgufFile& from);
  const std::vector<std::pair<std::string, Value>>& metadata() const { return metadata_; }

  // Adds a tensor; bytes.size() must equal the size implied by type and shape. Error on a
  // duplicate name, a bad shape (1..4 dims, each >= 1) or a row length that is not a multiple
  // of the type's block size.
  void add_tensor(std::string name, std::vector<uint64_t> shape, TensorType type,
                  std::vector<uint8_t> bytes);
  void add_tensor(std::string name, std::vector<uint64_t> shape, TensorType type,
                  TensorProducer produce);
  size_t n_tensors() const { return tensors_.size(); }
  // Sets the data alignment (a power of two) and records it as general.alignment (uint32).
  void set_alignment(uint64_t a);

  void write(ByteSink& out) const;
  // Atomic write to path (refuses to overwrite without force).
  void write_file(const std::string& path, bool force) const;

 private:
  struct PendingTensor {
    std::string name;
    std::vector<uint64_t> shape;
    TensorType type;
    uint64_t n_bytes = 0;
    std::vector<uint8_t> bytes;  // when produce is empty
    TensorProducer produce;
  };
  uint64_t check_tensor(const std::string& name, const std::vector<uint64_t>& shape,
                        TensorType type) const;
  std::vector<std::pair<std::string, Value>> metadata_;
  std::vector<PendingTensor> tensors_;
  uint64_t alignment_ = kDefaultAlignment;
};

}  // namespace ember::gguf
