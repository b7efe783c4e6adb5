#pragma once
// Read-only memory map of a whole file. Model weights and KVC1 payloads are read through it,
// so loading a model costs page faults, not copies.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace ember {

class MappedFile {
 public:
  // Throws Error naming the path if it cannot be opened or mapped.
  static std::shared_ptr<const MappedFile> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace ember
