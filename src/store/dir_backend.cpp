// dir:PATH, the embedded store: one file per key, every write through util/atomic_file.h.
// A key a:b:c is the file PATH/a/b/c. Names beginning with '.' are never keys: the atomic
// writer's temporaries (".<name>.tmp-<pid>-<n>", flock'ed by their writer for their whole
// life) and PATH/.lock, the store's lock file (remove_unless_exists).
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "store/backend.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/open_file.h"

namespace ember::store {
namespace {

// The components of a key or pattern, owned (the dir: backend builds paths from them).
std::vector<std::string> split(std::string_view s) {
  const std::vector<std::string_view> c = key_components(s);
  return {c.begin(), c.end()};
}

const char* file_kind(unsigned mode) { return S_ISREG(mode) ? "a regular file" : describe_file_type(mode); }

bool component_ok(std::string_view c) {
  if (c.empty() || c.size() > 200 || c[0] == '.') return false;
  for (char ch : c)
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
          ch == '_' || ch == '-' || ch == '{' || ch == '}'))
      return false;
  return true;
}

class DirBackend final : public Backend {
 public:
  DirBackend(std::string uri, std::string root) : uri_(std::move(uri)), root_(std::move(root)) {
    while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
  }
  const std::string& uri() const override { return uri_; }

  std::optional<std::string> get(const std::string& key, size_t max_bytes) override {
    const std::string p = path(key);
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) {
      if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
      fail(uri_ + ": " + key, std::string("cannot stat: ") + std::strerror(errno));
    }
    uint64_t size = 0;
    int fd = -1;
    try {
      fd = open_regular_file(p, &size, /*follow_symlinks=*/false);
    } catch (const Error&) {
      // A concurrent rm or gc may remove the key between the lstat and the open: a key that is
      // gone now is missing, as it would be for Redis; anything else is the error it was.
      if (::lstat(p.c_str(), &st) != 0 && (errno == ENOENT || errno == ENOTDIR)) return std::nullopt;
      throw;
    }
    if (size > max_bytes) {
      ::close(fd);
      fail_field(uri_, key, "a value of at most " + std::to_string(max_bytes) + " bytes",
                 std::to_string(size) + " bytes");
    }
    return read_all_and_close(fd, size, uri_ + ": " + key);
  }

  bool create(const std::string& key, std::string_view value) override {
    const std::string p = path(key);
    // Shared: creations run side by side; remove_unless_exists waits for them and they for it.
    const Lock lock(*this, LOCK_SH);
    if (path_exists(p)) return false;
    try {
      with_parent_retry(p, [&] { write_file_atomic(p, value, /*force=*/false); });
    } catch (const Error&) {
      if (path_exists(p)) return false;  // another writer won the race
      throw;
    }
    return true;
  }

  void replace(const std::string& key, std::string_view value) override {
    const std::string p = path(key);
    with_parent_retry(p, [&] { write_file_atomic(p, value, /*force=*/true); });
  }

  bool remove_unless_exists(const std::string& guard, const std::vector<std::string>& keys) override {
    const Lock lock(*this, LOCK_EX);
    if (path_exists(path(guard))) return false;
    for (const std::string& k : keys) remove(k);
    return true;
  }

  bool exists(const std::string& key) override { return path_exists(path(key)); }

  void remove(const std::string& key) override {
    const std::string p = path(key);
    if (::unlink(p.c_str()) != 0 && errno != ENOENT && errno != ENOTDIR)
      fail(uri_ + ": " + key, std::string("cannot remove: ") + std::strerror(errno));
    // Empty directories left behind are removed best-effort (a concurrent writer may refill one).
    std::string d = p;
    for (size_t n = split(key).size(); n > 1; --n) {
      d = d.substr(0, d.rfind('/'));
      if (::rmdir(d.c_str()) != 0) break;
    }
  }

  std::vector<std::string> scan(const std::string& pattern) override {
    std::vector<std::string> out;
    const std::vector<std::string> parts = split(pattern);
    walk(root_, "", parts, 0, out);
    return out;
  }

  int64_t increment(const std::string& key) override {
    // A counter is a file of n bytes: one O_APPEND write of one byte is atomic against other
    // incrementers, so no count is ever lost. O_NONBLOCK and the fstat: a FIFO (or a device)
    // planted at the key is refused at once instead of blocking every reader of the store.
    const std::string p = path(key);
    create_parents(p);
    const int fd = ::open(p.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    struct stat st {};
    if (fd < 0) {
      const std::string why = std::strerror(errno);
      // ENXIO (a FIFO without a reader), ELOOP (a symlink), EISDIR: name what is there.
      if (::lstat(p.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
        fail_field(uri_, key, "a counter (a regular file)", file_kind(st.st_mode));
      fail(uri_ + ": " + key, "cannot open counter: " + why);
    }
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      const unsigned mode = st.st_mode;
      ::close(fd);
      fail_field(uri_, key, "a counter (a regular file)", file_kind(mode));
    }
    const char one = '1';
    const bool ok = ::write(fd, &one, 1) == 1;
    const bool st_ok = ::fstat(fd, &st) == 0;
    ::close(fd);
    if (!ok || !st_ok) fail(uri_ + ": " + key, "cannot increment counter");
    return int64_t(st.st_size);
  }

  int64_t counter(const std::string& key) override {
    struct stat st {};
    if (::lstat(path(key).c_str(), &st) != 0) {
      if (errno == ENOENT || errno == ENOTDIR) return 0;
      fail(uri_ + ": " + key, std::string("cannot stat: ") + std::strerror(errno));
    }
    if (!S_ISREG(st.st_mode)) fail_field(uri_, key, "a counter (a regular file)", file_kind(st.st_mode));
    return int64_t(st.st_size);
  }

  std::vector<Temporary> dead_temporaries() override {
    std::vector<Temporary> out;
    find_temporaries(root_ + "/ember", 0, out);
    return out;
  }

  bool remove_dead_temporary(const std::string& p) override {
    const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return errno == ENOENT;
    // Under its lock: a writer that took it since the listing keeps its file.
    const bool dead = ::flock(fd, LOCK_EX | LOCK_NB) == 0 && writer_is_dead(p);
    if (dead && ::unlink(p.c_str()) != 0 && errno != ENOENT) {
      ::close(fd);
      fail(uri_ + ": " + p, std::string("cannot remove a dead put's temporary: ") + std::strerror(errno));
    }
    ::close(fd);
    return dead;
  }

 private:
  // flock on PATH/.lock for the scope (created on first use).
  class Lock {
   public:
    Lock(DirBackend& b, int op) {
      const std::string p = b.root_ + "/.lock";
      b.create_parents(p);
      fd_ = ::open(p.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
      if (fd_ < 0) fail(b.uri_ + ": " + p, std::string("cannot open the store's lock file: ") + std::strerror(errno));
      while (::flock(fd_, op) != 0) {
        if (errno == EINTR) continue;
        const std::string why = std::strerror(errno);
        ::close(fd_);
        fail(b.uri_ + ": " + p, "cannot lock the store's lock file: " + why);
      }
    }
    ~Lock() { ::close(fd_); }
    Lock(const Lock&) = delete;
    Lock& operator=(const Lock&) = delete;

   private:
    int fd_ = -1;
  };

  // remove() takes empty directories away; a writer whose parent vanished between creating it
  // and creating its temporary tries again (bounded) rather than failing the put.
  template <class Fn>
  void with_parent_retry(const std::string& p, Fn fn) {
    for (int attempt = 0;; ++attempt) {
      try {
        fn();
        return;
      } catch (const Error&) {
        if (attempt >= 4 || path_exists(p.substr(0, p.rfind('/')))) throw;
      }
    }
  }

  // ".<name>.tmp-<pid>-<n>": its writer's pid; dead when no such process exists here.
  static bool writer_is_dead(const std::string& p) {
    const size_t t = p.rfind(".tmp-");
    if (t == std::string::npos) return false;
    const long pid = std::strtol(p.c_str() + t + 5, nullptr, 10);
    return pid > 0 && ::kill(pid_t(pid), 0) != 0 && errno == ESRCH;
  }

  void find_temporaries(const std::string& dir, int depth, std::vector<Temporary>& out) const {
    if (depth > 8) return;  // the layout is 6 deep; deeper is not ours
    DIR* d = ::opendir(dir.c_str());
    if (!d) return;
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d)) names.emplace_back(e->d_name);
    ::closedir(d);
    const int64_t now = int64_t(std::time(nullptr));
    for (const std::string& n : names) {
      if (n == "." || n == "..") continue;
      const std::string p = dir + "/" + n;
      struct stat st {};
      if (::lstat(p.c_str(), &st) != 0) continue;
      if (S_ISDIR(st.st_mode) && n[0] != '.') {
        find_temporaries(p, depth + 1, out);
      } else if (S_ISREG(st.st_mode) && n[0] == '.' && n.find(".tmp-") != std::string::npos) {
        const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0) continue;
        const bool dead = ::flock(fd, LOCK_EX | LOCK_NB) == 0 && writer_is_dead(p);
        ::close(fd);  // releases the probe's lock
        if (dead) out.push_back({p, now - int64_t(st.st_mtime)});
      }
    }
  }

  std::string path(const std::string& key) const {
    std::string p = root_;
    for (const std::string& c : split(key)) {
      if (!component_ok(c)) fail_field(uri_, "key", "components of [A-Za-z0-9._{}-]", key);
      p += "/" + c;
    }
    return p;
  }

  // mkdir -p of p's parent directories (root included).
  void create_parents(const std::string& p) const {
    for (size_t i = p.find('/', 1); i != std::string::npos; i = p.find('/', i + 1)) {
      const std::string d = p.substr(0, i);
      if (::mkdir(d.c_str(), 0755) != 0 && errno != EEXIST)
        fail(uri_ + ": " + d, std::string("cannot create directory: ") + std::strerror(errno));
    }
  }

  void walk(const std::string& dir, const std::string& prefix, const std::vector<std::string>& parts, size_t i,
            std::vector<std::string>& out) const {
    const bool last = i + 1 == parts.size();
    auto visit = [&](const std::string& name) {
      const std::string p = dir + "/" + name;
      const std::string key = prefix.empty() ? name : prefix + ":" + name;
      struct stat st {};
      if (::lstat(p.c_str(), &st) != 0) return;
      if (last) {
        if (S_ISREG(st.st_mode)) out.push_back(key);
      } else if (S_ISDIR(st.st_mode)) {
        walk(p, key, parts, i + 1, out);
      }
    };
    if (parts[i] != "*") {
      if (component_ok(parts[i])) visit(parts[i]);
      return;
    }
    DIR* d = ::opendir(dir.c_str());
    if (!d) return;
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (component_ok(n)) names.push_back(n);
    }
    ::closedir(d);
    for (const std::string& n : names) visit(n);
  }

  std::string uri_, root_;
};

}  // namespace

std::unique_ptr<Backend> open_dir_backend(const std::string& uri, const std::string& root) {
  if (root.empty()) fail_field(uri, "path", "dir:PATH with a non-empty PATH", "empty");
  // A store is a directory, or nothing yet (put creates it): a file there is a wrong URI, not
  // an empty store.
  struct stat st {};
  if (::stat(root.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
    fail_field(uri, "path", "a directory (or nothing yet)", file_kind(st.st_mode));
  return std::make_unique<DirBackend>(uri, root);
}

}  // namespace ember::store
