#include "util/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "util/error.h"
#include "util/open_file.h"

namespace ember {
namespace {

std::atomic<unsigned> g_temp_counter{0};

std::string parent_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string base_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string temp_sibling(const std::string& final_path) {
  std::string parent = parent_of(final_path);
  std::string base = base_of(final_path);
  if (base.empty() || base == "." || base == "..")
    fail_field(final_path, "output path", "a file or directory name", "'" + base + "'");
  return (parent == "." && final_path.find('/') == std::string::npos ? std::string() : parent + "/") +
         "." + base + ".tmp-" + std::to_string(::getpid()) + "-" +
         std::to_string(g_temp_counter.fetch_add(1));
}

void fsync_path(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) fail(path, std::string("cannot open to sync: ") + std::strerror(errno));
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) fail(path, std::string("fsync failed: ") + std::strerror(errno));
}

void refuse_existing(const std::string& path, bool force) {
  if (!force && path_exists(path))
    fail(path, "already exists; refusing to overwrite it (pass --force to replace it)");
}

}  // namespace

class AtomicFile::FdSink final : public ByteSink {
 public:
  FdSink(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~FdSink() override {
    if (fd_ >= 0) ::close(fd_);
  }
  void write(const void* data, size_t n) override {
    const auto* p = static_cast<const uint8_t*>(data);
    size_t left = n;
    while (left) {
      const ssize_t w = ::write(fd_, p, left);
      if (w < 0) {
        if (errno == EINTR) continue;
        fail(path_, std::string("write failed: ") + std::strerror(errno));
      }
      p += w;
      left -= size_t(w);
    }
    n_bytes_ += n;
  }
  using ByteSink::write;
  void sync_and_close() {
    if (::fsync(fd_) != 0) fail(path_, std::string("fsync failed: ") + std::strerror(errno));
    if (::close(fd_) != 0) {
      fd_ = -1;
      fail(path_, std::string("close failed: ") + std::strerror(errno));
    }
    fd_ = -1;
  }

 private:
  int fd_;
  std::string path_;
};

AtomicFile::AtomicFile(std::string final_path, bool force)
    : final_path_(std::move(final_path)), temp_path_(temp_sibling(final_path_)), force_(force) {
  refuse_existing(final_path_, force_);
  const int fd = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) fail(temp_path_, std::string("cannot create: ") + std::strerror(errno));
  sink_ = std::make_unique<FdSink>(fd, temp_path_);
}

AtomicFile::~AtomicFile() {
  if (!committed_) {
    sink_.reset();
    ::unlink(temp_path_.c_str());
  }
}

ByteSink& AtomicFile::sink() { return *sink_; }

void AtomicFile::commit() {
  EMBER_CHECK(!committed_);
  sink_->sync_and_close();
  refuse_existing(final_path_, force_);
  if (::rename(temp_path_.c_str(), final_path_.c_str()) != 0)
    fail(final_path_, std::string("rename failed: ") + std::strerror(errno));
  committed_ = true;
  fsync_path(parent_of(final_path_), true);
}

AtomicDirectory::AtomicDirectory(std::string final_path, bool force)
    : final_path_(std::move(final_path)), temp_path_(temp_sibling(final_path_)), force_(force) {
  while (final_path_.size() > 1 && final_path_.back() == '/') final_path_.pop_back();
  temp_path_ = temp_sibling(final_path_);
  refuse_existing(final_path_, force_);
  if (::mkdir(temp_path_.c_str(), 0755) != 0)
    fail(temp_path_, std::string("cannot create directory: ") + std::strerror(errno));
}

AtomicDirectory::~AtomicDirectory() {
  if (!committed_) {
    std::error_code ec;
    std::filesystem::remove_all(temp_path_, ec);
  }
}

std::unique_ptr<AtomicFile> AtomicDirectory::create(const std::string& name) {
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
    fail_field(temp_path_, "file name", "a plain file name", "'" + name + "'");
  // The file's own rename happens inside the temporary directory, which is invisible.
  return std::make_unique<AtomicFile>(temp_path_ + "/" + name, false);
}

void AtomicDirectory::commit() {
  EMBER_CHECK(!committed_);
  fsync_path(temp_path_, true);
  std::string aside;
  if (path_exists(final_path_)) {
    if (!force_) refuse_existing(final_path_, false);
    aside = temp_sibling(final_path_) + ".old";
    if (::rename(final_path_.c_str(), aside.c_str()) != 0)
      fail(final_path_, std::string("cannot move existing aside: ") + std::strerror(errno));
  }
  if (::rename(temp_path_.c_str(), final_path_.c_str()) != 0)
    fail(final_path_, std::string("rename failed: ") + std::strerror(errno));
  committed_ = true;
  fsync_path(parent_of(final_path_), true);
  if (!aside.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(aside, ec);
  }
}

void write_file_atomic(const std::string& path, std::string_view contents, bool force) {
  AtomicFile f(path, force);
  f.sink().write(contents);
  f.commit();
}

std::string read_file(const std::string& path, size_t max_bytes) {
  uint64_t size = 0;
  const int fd = open_regular_file(path, &size);
  if (size > max_bytes) {
    ::close(fd);
    fail_field(path, "size", "at most " + std::to_string(max_bytes) + " bytes",
               std::to_string(size) + " bytes");
  }
  std::string out(size_t(size), '\0');
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t r = ::read(fd, out.data() + got, out.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      ::close(fd);
      fail(path, "read error or file shrank while reading");
    }
    got += size_t(r);
  }
  ::close(fd);
  return out;
}

bool path_exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

void remove_stale_temporaries(const std::string& final_path) {
  const std::string parent = parent_of(final_path);
  const std::string prefix = "." + base_of(final_path) + ".tmp-";
  DIR* d = ::opendir(parent.c_str());
  if (!d) return;
  while (dirent* e = ::readdir(d)) {
    if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) {
      std::error_code ec;
      std::filesystem::remove_all(parent + "/" + e->d_name, ec);
    }
  }
  ::closedir(d);
}

}  // namespace ember
