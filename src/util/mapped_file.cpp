#include "util/mapped_file.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/error.h"
#include "util/open_file.h"

namespace ember {

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path) {
  uint64_t size = 0;
  const int fd = open_regular_file(path, &size);
  std::shared_ptr<MappedFile> m(new MappedFile());
  m->path_ = path;
  m->size_ = size_t(size);
  if (m->size_ > 0) {
    void* p = ::mmap(nullptr, m->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      fail(path, std::string("mmap failed: ") + std::strerror(errno));
    }
    m->data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return m;
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace ember
