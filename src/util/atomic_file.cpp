#include "util/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <set>
#include <utility>
#include <vector>

#include "util/error.h"
#include "util/open_file.h"
#include "util/printable.h"

namespace ember {
namespace {

namespace fs = std::filesystem;

std::atomic<unsigned> g_temp_counter{0};
std::atomic<bool> g_renameat2_disabled{false};
std::atomic<uint64_t> g_no_replace{0}, g_exchange{0}, g_fallback{0};

std::string err() { return std::strerror(errno); }

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

std::string strip_trailing_slashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

std::string temp_prefix(const std::string& final_path) { return "." + base_of(final_path) + ".tmp-"; }

std::string temp_sibling(const std::string& final_path) {
  const std::string base = base_of(final_path);
  if (base.empty() || base == "." || base == "..")
    fail_field(final_path, "output path", "a file or directory name", "'" + base + "'");
  const std::string dir = final_path.find('/') == std::string::npos ? std::string() : parent_of(final_path) + "/";
  return dir + temp_prefix(final_path) + std::to_string(::getpid()) + "-" +
         std::to_string(g_temp_counter.fetch_add(1));
}

// The pid in "<prefix><pid>-<n>", or -1 when `name` is not exactly of that form.
pid_t temp_owner(const std::string& name, const std::string& prefix) {
  if (name.compare(0, prefix.size(), prefix) != 0) return -1;
  const std::string rest = name.substr(prefix.size());
  const auto dash = rest.find('-');
  if (dash == 0 || dash == std::string::npos || dash + 1 == rest.size() || dash > 9) return -1;
  for (size_t i = 0; i < rest.size(); ++i)
    if (i != dash && (rest[i] < '0' || rest[i] > '9')) return -1;
  return pid_t(std::stol(rest.substr(0, dash)));
}

// "a regular file", "a directory", "a FIFO", ... for messages.
std::string kind_of(unsigned mode) { return S_ISREG(mode) ? "a regular file" : describe_file_type(mode); }

bool pid_is_dead(pid_t pid) { return pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH; }

void fsync_path(const std::string& path, bool directory, const std::string& shown) {
  const int fd = ::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) fail(shown, "cannot open to sync: " + err());
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) fail(shown, "fsync failed: " + err());
}

void refuse_existing(const std::string& path, bool force) {
  if (!force && path_exists(path))
    fail(path, "already exists; refusing to overwrite it (pass --force to replace it)");
}

// mkdir -p of the parent of `path` (mode 0755), each new directory fsync'ed into its own
// parent. Errors name `shown` (the user's output) and the parent that could not be made.
void make_parents(const std::string& path, const std::string& shown) {
  const std::string parent = parent_of(path);
  struct stat st {};
  if (::stat(parent.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode))
      fail(shown, "parent '" + parent + "' is not a directory (it is " + kind_of(st.st_mode) + ")");
    return;
  }
  if (errno != ENOENT && errno != ENOTDIR) fail(shown, "cannot reach parent directory '" + parent + "': " + err());
  make_parents(parent, shown);
  if (::mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST)
    fail(shown, "cannot create parent directory '" + parent + "': " + err());
  fsync_path(parent_of(parent), true, shown);
}

// Forced replacement needs the same kind of thing at the path: a directory for a directory,
// a non-directory for a file (an existing symlink is itself replaced, never followed).
void refuse_other_kind(const std::string& path, bool directory) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;
  if (S_ISDIR(st.st_mode) != directory)
    fail(path, "exists and is " + kind_of(st.st_mode) + "; --force replaces only " +
                   (directory ? "a directory" : "a file"));
}

int rename_flags(const std::string& from, const std::string& to, unsigned flags) {
  if (g_renameat2_disabled) {
    errno = EINVAL;
    return -1;
  }
  return ::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), flags);
}

bool unsupported(int e) { return e == EINVAL || e == ENOSYS || e == ENOTSUP; }

void remove_tree(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
}

// Whether canonical path `p` lies strictly below canonical directory `dir`.
bool is_below(const std::string& p, const std::string& dir) {
  return p.size() > dir.size() && p.compare(0, dir.size(), dir) == 0 && (dir == "/" || p[dir.size()] == '/');
}

// N when `name` is numbered_prefix N numbered_suffix (N decimal, no leading zero), else -1.
long numbered_index(const std::string& name, const DirectoryKind& k) {
  const std::string &pre = k.numbered_prefix, &suf = k.numbered_suffix;
  if (pre.empty() || name.size() <= pre.size() + suf.size() || name.compare(0, pre.size(), pre) != 0 ||
      name.compare(name.size() - suf.size(), suf.size(), suf) != 0)
    return -1;
  const std::string digits = name.substr(pre.size(), name.size() - pre.size() - suf.size());
  if (digits.size() > 9 || (digits.size() > 1 && digits[0] == '0')) return -1;
  for (char ch : digits)
    if (ch < '0' || ch > '9') return -1;
  return std::stol(digits);
}

bool kind_names(const DirectoryKind& k, const std::string& name) {
  return std::find(k.entries.begin(), k.entries.end(), name) != k.entries.end() || numbered_index(name, k) >= 0;
}

// The old directory a forced replacement swapped out (checked by refuse_unless_replaceable an
// instant before): its kind's regular files are unlinked, then the directory is rmdir'ed. Never
// recursive, so whatever appeared in it since the check survives (under the temporary name).
void remove_replaced(const std::string& dir, const DirectoryKind& kind) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d))
      if (kind_names(kind, e->d_name)) names.emplace_back(e->d_name);
    ::closedir(d);
  }
  for (const std::string& n : names) {
    struct stat st {};
    const std::string p = dir + "/" + n;
    if (::lstat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode)) ::unlink(p.c_str());
  }
  ::rmdir(dir.c_str());
}

[[noreturn]] void fail_exists(const std::string& shown) {
  fail(shown, "already exists; refusing to overwrite it (pass --force to replace it)");
}

// The fallbacks where renameat2 flags are not supported (see the header).
void publish_fallback(const std::string& temp, const std::string& final, const std::string& shown, bool force,
                      const DirectoryKind* kind) {
  const bool directory = kind != nullptr;
  ++g_fallback;
  if (!directory) {
    if (force) {
      if (::rename(temp.c_str(), final.c_str()) != 0) fail(shown, "rename failed: " + err());
      return;
    }
    if (::link(temp.c_str(), final.c_str()) != 0) {
      if (errno == EEXIST) fail_exists(shown);
      fail(shown, "link failed: " + err());
    }
    ::unlink(temp.c_str());
    return;
  }
  std::string aside;
  if (path_exists(final)) {
    if (!force) fail_exists(shown);
    refuse_unless_replaceable(final, *kind);
    aside = temp_sibling(final);
    if (::rename(final.c_str(), aside.c_str()) != 0) fail(shown, "cannot move the existing one aside: " + err());
  }
  if (::rename(temp.c_str(), final.c_str()) != 0) {
    if (errno == EEXIST || errno == ENOTEMPTY) fail_exists(shown);
    fail(shown, "rename failed: " + err());
  }
  if (!aside.empty()) remove_replaced(aside, *kind);
}

// Moves `temp` to `final` without ever replacing anything, or with force by exchange. `kind`
// is null for a file, the directory's kind for a directory.
void publish(const std::string& temp, const std::string& final, const std::string& shown, bool force,
             const DirectoryKind* kind) {
  const bool directory = kind != nullptr;
  if (force) refuse_other_kind(final, directory);
  for (int attempt = 0; attempt < 4; ++attempt) {
    if (!force || !path_exists(final)) {
      if (rename_flags(temp, final, RENAME_NOREPLACE) == 0) {
        ++g_no_replace;
        return;
      }
      if (unsupported(errno)) return publish_fallback(temp, final, shown, force, kind);
      if (errno != EEXIST) fail(shown, "rename failed: " + err());
      if (!force) fail_exists(shown);
      refuse_other_kind(final, directory);
    }
    // Checked again at the last moment: the directory may have changed since the constructor.
    if (directory) refuse_unless_replaceable(final, *kind);
    if (rename_flags(temp, final, RENAME_EXCHANGE) == 0) {
      ++g_exchange;
      // The old artifact now sits under the temporary name; a kill here leaves it to the
      // next write's sweep (this process's pid is dead by then), the new one at the path.
      if (directory) {
        remove_replaced(temp, *kind);
      } else {
        ::unlink(temp.c_str());
      }
      return;
    }
    if (unsupported(errno)) return publish_fallback(temp, final, shown, force, kind);
    if (errno != ENOENT) fail(shown, "exchange failed: " + err());
    // The existing one vanished between the check and the exchange: publish afresh.
  }
  fail(shown, "the path kept changing while publishing; giving up");
}

}  // namespace

class AtomicFile::FdSink final : public ByteSink {
 public:
  FdSink(int fd, std::string shown) : fd_(fd), shown_(std::move(shown)) {}
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
        if (errno == EFBIG)  // with SIGXFSZ ignored (cli/main.cpp), RLIMIT_FSIZE reads as this
          fail(shown_, "write failed: the file size limit was reached (ulimit -f, RLIMIT_FSIZE; " +
                           std::to_string(n_bytes_ + (n - left)) + " bytes written); nothing was published");
      }
      p += w;
      left -= size_t(w);
    }
    n_bytes_ += n;
  }
  using ByteSink::write;
  void sync() {
    if (::fsync(fd_) != 0) fail(shown_, "fsync failed: " + err());
  }
  // Closing releases the lock: only once the temporary name is gone (published or removed).
  void close() {
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail(shown_, "close failed: " + err());
  }

 private:
  int fd_;
  std::string shown_;
};

AtomicFile::AtomicFile(std::string final_path, bool force)
    : final_path_(std::move(final_path)), shown_path_(final_path_), force_(force) {
  temp_path_ = temp_sibling(final_path_);
  make_parents(final_path_, final_path_);
  remove_stale_temporaries(final_path_);
  refuse_existing(final_path_, force_);
  if (force_) refuse_other_kind(final_path_, /*directory=*/false);
  open_temporary();
}

AtomicFile::AtomicFile(std::string final_path, std::string shown_path)
    : final_path_(std::move(final_path)), shown_path_(std::move(shown_path)) {
  temp_path_ = temp_sibling(final_path_);
  if (path_exists(final_path_)) fail(shown_path_, "already written in this directory");
  open_temporary();
}

void AtomicFile::open_temporary() {
  const int fd = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) fail(shown_path_, "cannot create a temporary beside it: " + err());
  sink_ = std::make_unique<FdSink>(fd, shown_path_);
  if (::flock(fd, LOCK_EX) != 0) {
    ::unlink(temp_path_.c_str());
    fail(shown_path_, "cannot lock its temporary: " + err());
  }
}

AtomicFile::~AtomicFile() {
  if (!committed_) ::unlink(temp_path_.c_str());  // still locked: no sweeper races the unlink
  sink_.reset();
}

ByteSink& AtomicFile::sink() { return *sink_; }

void AtomicFile::commit() {
  EMBER_CHECK(!committed_);
  sink_->sync();
  publish(temp_path_, final_path_, shown_path_, force_, /*kind=*/nullptr);
  committed_ = true;
  sink_->close();
  fsync_path(parent_of(final_path_), true, shown_path_);
}

AtomicDirectory::AtomicDirectory(std::string final_path, DirectoryKind kind, bool force)
    : final_path_(strip_trailing_slashes(std::move(final_path))), kind_(std::move(kind)), force_(force) {
  temp_path_ = temp_sibling(final_path_);
  make_parents(final_path_, final_path_);
  remove_stale_temporaries(final_path_);
  refuse_existing(final_path_, force_);
  if (force_) {
    refuse_other_kind(final_path_, /*directory=*/true);
    refuse_unless_replaceable(final_path_, kind_);  // before anything is computed or written
  }
  if (::mkdir(temp_path_.c_str(), 0755) != 0) fail(final_path_, "cannot create a temporary beside it: " + err());
  lock_fd_ = ::open(temp_path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (lock_fd_ < 0 || ::flock(lock_fd_, LOCK_EX) != 0) {
    const std::string why = err();
    if (lock_fd_ >= 0) ::close(lock_fd_);
    ::rmdir(temp_path_.c_str());
    fail(final_path_, "cannot lock its temporary: " + why);
  }
}

AtomicDirectory::~AtomicDirectory() {
  if (!committed_) remove_tree(temp_path_);
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

std::unique_ptr<AtomicFile> AtomicDirectory::create(const std::string& name) {
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
    fail_field(final_path_, "file name", "a plain file name", "'" + name + "'");
  // The file's own rename happens inside the temporary directory, which is invisible.
  return std::unique_ptr<AtomicFile>(new AtomicFile(temp_path_ + "/" + name, final_path_ + "/" + name));
}

void AtomicDirectory::commit() {
  EMBER_CHECK(!committed_);
  fsync_path(temp_path_, true, final_path_);
  publish(temp_path_, final_path_, final_path_, force_, &kind_);
  committed_ = true;
  ::close(lock_fd_);
  lock_fd_ = -1;
  fsync_path(parent_of(final_path_), true, final_path_);
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
  return read_all_and_close(fd, size, path);
}

std::string read_input(const std::string& path, size_t max_bytes) {
  if (path != "-") return read_file(path, max_bytes);
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t r = ::read(STDIN_FILENO, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) fail("(stdin)", "read error");
    if (r == 0) return out;
    if (out.size() + size_t(r) > max_bytes)
      fail_field("(stdin)", "size", "at most " + std::to_string(max_bytes) + " bytes", "more");
    out.append(buf, size_t(r));
  }
}

bool path_exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

void remove_stale_temporaries(const std::string& final_path) {
  const std::string path = strip_trailing_slashes(final_path);
  const std::string parent = parent_of(path), prefix = temp_prefix(path);
  std::vector<std::pair<std::string, pid_t>> candidates;
  if (DIR* d = ::opendir(parent.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      const pid_t pid = temp_owner(e->d_name, prefix);
      if (pid > 0) candidates.emplace_back(parent + "/" + e->d_name, pid);
    }
    ::closedir(d);
  }
  for (const auto& [temp, pid] : candidates) {
    struct stat st {};
    if (::lstat(temp.c_str(), &st) != 0 || !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))) continue;
    const bool dir = S_ISDIR(st.st_mode);
    const int fd = ::open(temp.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | (dir ? O_DIRECTORY : 0));
    if (fd < 0) continue;
    struct stat held {};
    // Lock free, still the same object under that name, and its writer gone: stale.
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0 && ::fstat(fd, &held) == 0 && held.st_dev == st.st_dev &&
        held.st_ino == st.st_ino && pid_is_dead(pid)) {
      if (dir) {
        remove_tree(temp);
      } else {
        ::unlink(temp.c_str());
      }
    }
    ::close(fd);
  }
}

void refuse_output_is_input(const std::string& output, const std::vector<std::string>& inputs) {
  if (output.empty()) return;
  std::error_code ec;
  const fs::path out_canon = fs::weakly_canonical(strip_trailing_slashes(output), ec);
  const bool out_canon_ok = !ec;
  struct stat os {};
  const bool out_exists = ::stat(output.c_str(), &os) == 0;
  for (const std::string& in : inputs) {
    if (in.empty()) continue;
    struct stat is {};
    bool same = out_exists && ::stat(in.c_str(), &is) == 0 && os.st_dev == is.st_dev && os.st_ino == is.st_ino;
    const fs::path in_canon = fs::weakly_canonical(strip_trailing_slashes(in), ec);
    if (!same && out_canon_ok && !ec) same = in_canon == out_canon;
    if (same)
      fail(output, "is the input '" + in + "' itself; refusing to write an output over an input (even with --force)");
    if (out_canon_ok && !ec) {
      const std::string o = out_canon.string(), i = in_canon.string();
      if (is_below(i, o))
        fail(output, "contains the input '" + in +
                         "'; refusing to replace a directory that holds an input (even with --force)");
      if (is_below(o, i) && fs::is_directory(in_canon, ec))
        fail(output, "is inside the input directory '" + in + "'; refusing to write into an input");
    }
  }
}

std::string DirectoryKind::describe_entries() const {
  if (entries.empty()) return numbered_prefix + "<N>" + numbered_suffix + " for N = 0, 1, ...";
  std::string out;
  for (const std::string& e : entries) out += (out.empty() ? "" : ", ") + e;
  return out;
}

void refuse_unless_replaceable(const std::string& path, const DirectoryKind& kind) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;  // nothing there to replace
  const std::string expected = kind.label + " (" + kind.describe_entries() + ") or an empty directory";
  if (!S_ISDIR(st.st_mode)) fail_field(path, "--force", expected, kind_of(st.st_mode) + " (left as it was)");
  // Whatever they hold: replacing the working directory or an ancestor pulls the ground from
  // under this process (and whoever started it), and "/" is everything.
  std::error_code ec, cwd_ec;
  const fs::path canon = fs::canonical(path, ec);
  const fs::path cwd = fs::canonical(fs::current_path(cwd_ec), cwd_ec);
  if (ec) fail(path, "cannot resolve it to check what --force would replace: " + ec.message());
  if (canon == "/") fail_field(path, "--force", expected, "the root directory '/' (left as it was)");
  if (!cwd_ec && (canon == cwd || is_below(cwd.string(), canon.string())))
    fail_field(path, "--force", expected + ", never the working directory or one of its ancestors",
               (canon == cwd ? "the current working directory" : "an ancestor of the current working directory '" +
                                                                    cwd.string() + "'") + std::string(" (left as it was)"));
  // Its entries, by name, in order: what is not the kind's, then what the kind misses.
  std::vector<std::pair<std::string, unsigned>> found;
  DIR* d = ::opendir(path.c_str());
  if (!d) fail(path, "cannot list it to check what --force would replace: " + err());
  while (const dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    struct stat es {};
    found.emplace_back(n, ::lstat((path + "/" + n).c_str(), &es) == 0 ? unsigned(es.st_mode) : 0u);
  }
  ::closedir(d);
  if (found.empty()) return;  // an empty directory holds nothing to lose
  std::sort(found.begin(), found.end());
  std::vector<std::string> odd;
  std::set<std::string> named;
  std::set<long> numbers;
  for (const auto& [n, mode] : found) {
    const std::string q = "'" + printable(n) + "'";
    if (!S_ISREG(mode)) {
      odd.push_back(q + " (" + (mode ? describe_file_type(mode) : std::string("unreadable")) + ")");
    } else if (!kind_names(kind, n)) {
      odd.push_back(q);
    } else {
      named.insert(n);
      if (numbered_index(n, kind) >= 0) numbers.insert(numbered_index(n, kind));
    }
  }
  if (odd.empty()) {
    for (const std::string& e : kind.entries)
      if (!named.count(e)) odd.push_back("no '" + e + "'");
    if (kind.entries.empty() && !numbers.empty() && *numbers.rbegin() + 1 != long(numbers.size()))
      odd.push_back(std::to_string(numbers.size()) + " numbered files, not N = 0.." +
                    std::to_string(numbers.size() - 1));
    if (odd.empty()) return;
  }
  std::string list;
  for (size_t i = 0; i < odd.size() && i < 4; ++i) list += (i ? ", " : "") + odd[i];
  if (odd.size() > 4) list += " and " + std::to_string(odd.size() - 4) + " more";
  fail_field(path, "--force", expected, list + " (left as it was)");
}

AtomicPublishCounts atomic_publish_counts() {
  return AtomicPublishCounts{g_no_replace.load(), g_exchange.load(), g_fallback.load()};
}

void atomic_set_renameat2_disabled_for_testing(bool disabled) { g_renameat2_disabled = disabled; }

}  // namespace ember
