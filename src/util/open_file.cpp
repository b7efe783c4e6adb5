#include "util/open_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/error.h"

namespace ember {

const char* describe_file_type(unsigned mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

int open_regular_file(const std::string& path, uint64_t* size, bool follow_symlinks) {
  // O_NONBLOCK so that a FIFO (or a device) cannot block the open itself; it is cleared again
  // once fstat has shown a regular file, for which it has no effect anyway.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | (follow_symlinks ? 0 : O_NOFOLLOW));
  if (fd < 0) {
    if (errno == ELOOP && !follow_symlinks) fail(path, "is a symbolic link; expected a regular file");
    fail(path, std::string("cannot open: ") + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, std::string("not a regular file (") + describe_file_type(st.st_mode) + ")");
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    ::close(fd);
    fail(path, std::string("cannot clear O_NONBLOCK: ") + std::strerror(errno));
  }
  *size = uint64_t(st.st_size);
  return fd;
}

std::string read_all_and_close(int fd, uint64_t size, const std::string& where) {
  std::string out(size_t(size), '\0');
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t r = ::read(fd, out.data() + got, out.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      ::close(fd);
      fail(where, "read error or file shrank while reading");
    }
    got += size_t(r);
  }
  ::close(fd);
  return out;
}

}  // namespace ember
