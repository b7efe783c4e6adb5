// Reading, writing and verifying ember.kv-snapshot.v1 directories.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <set>

#include "kv/snapshot.h"
#include "kv/strict_json.h"
#include "util/atomic_file.h"
#include "util/byte_io.h"
#include "util/error.h"
#include "util/open_file.h"
#include "util/sha256.h"

namespace ember::kv {
namespace {

std::string join(const std::string& dir, const char* name) {
  return (dir.empty() || dir.back() == '/') ? dir + name : dir + "/" + name;
}

void check_cache_shape(const Snapshot& s, const std::string& where) {
  const Geometry& g = s.manifest.geometry;
  const model::KvCache& c = s.cache;
  if (c.n_layers != g.layers || c.n_kv_heads != g.kv_heads || c.head_dim != g.head_dim)
    fail_field(where, "cache geometry",
               "layers/kv_heads/head_dim " + std::to_string(g.layers) + "/" + std::to_string(g.kv_heads) +
                   "/" + std::to_string(g.head_dim) + " (manifest)",
               std::to_string(c.n_layers) + "/" + std::to_string(c.n_kv_heads) + "/" +
                   std::to_string(c.head_dim));
  if (c.n_pos < 1 || c.n_pos > c.capacity ||
      c.k.size() != size_t(c.n_layers) * c.n_kv_heads * c.capacity * c.head_dim || c.v.size() != c.k.size())
    fail_field(where, "cache", "a well-formed cache with 1 <= n_pos <= capacity",
               "n_pos " + std::to_string(c.n_pos) + ", capacity " + std::to_string(c.capacity));
}

// The one payload serializer: active rows of every (layer, kv_head), in that order. Writing,
// sealing and hashing all go through it, so a hash is always over the bytes written.
void write_payload(const model::KvCache& c, bool keys, ByteSink& out) {
  const size_t row = size_t(c.n_pos) * size_t(c.head_dim) * sizeof(uint16_t);
  for (int l = 0; l < c.n_layers; ++l)
    for (int h = 0; h < c.n_kv_heads; ++h)
      out.write(keys ? c.k_row(l, h, 0) : c.v_row(l, h, 0), row);
}

// Opens a payload file without following links and checks it is a regular file of `bytes`.
int open_payload(const std::string& path, const std::string& field, uint64_t bytes) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (issue 12, defect 2).
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    fail_field(path, field, "a regular file", errno == ENOENT ? "missing" : std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const std::string found = ::fstat(fd, &st) == 0 ? describe_file_type(st.st_mode) : "something else";
    ::close(fd);
    fail_field(path, field, "a regular file", found);
  }
  if (uint64_t(st.st_size) != bytes) {
    ::close(fd);
    fail_field(path, field + ".bytes", std::to_string(bytes) + " (manifest)",
               std::to_string(st.st_size) + (uint64_t(st.st_size) < bytes ? " (truncated)" : " (extended)"));
  }
  return fd;
}

// Reads exactly n bytes into dst (or streams them when dst is null) and returns their hash.
std::string read_and_hash(int fd, const std::string& path, uint8_t* dst, uint64_t n) {
  Sha256 h;
  std::unique_ptr<uint8_t[]> buf;
  const size_t chunk = size_t(1) << 20;
  if (!dst) buf.reset(new uint8_t[chunk]);
  uint64_t got = 0;
  while (got < n) {
    uint8_t* p = dst ? dst + got : buf.get();
    const size_t want = size_t(std::min<uint64_t>(dst ? n - got : chunk, n - got));
    const ssize_t r = ::read(fd, p, want);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) fail(path, "read error or file shrank while reading");
    h.update(p, size_t(r));
    got += uint64_t(r);
  }
  return to_hex(h.finish());
}

// Exactly the three fixed names; anything else (a stray file, a link, a directory) is refused.
void check_entries(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) fail_field(dir, "snapshot", "a directory", "missing");
  if (!S_ISDIR(st.st_mode)) fail_field(dir, "snapshot", "a directory", "not a directory");
  DIR* d = ::opendir(dir.c_str());
  if (!d) fail(dir, std::string("cannot list: ") + std::strerror(errno));
  std::string extra;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n == "." || n == ".." || n == kManifestFile || n == kKeysFile || n == kValuesFile) continue;
    if (extra.empty() || n < extra) extra = n;  // report the smallest, deterministically
  }
  ::closedir(d);
  if (!extra.empty())
    fail_field(dir, "entries", "only manifest.json, keys.f16le, values.f16le",
               "an unexpected entry '" + extra + "'");
}

void check_hash(const std::string& dir, const char* field, const std::string& want,
                const std::string& found) {
  if (want != found) fail_field(dir, field, want + " (manifest)", found + " (payload bytes)");
}

}  // namespace

void seal(Snapshot& s) {
  const std::string where = "snapshot";
  check_cache_shape(s, where);
  SnapshotManifest& m = s.manifest;
  m.geometry.positions = s.cache.n_pos;
  m.prefix.sha256 = prefix_hash(m.prefix.tokens);
  for (bool k : {true, false}) {
    HashingSink h;
    write_payload(s.cache, k, h);
    PayloadEntry& e = k ? m.keys : m.values;
    e.file = k ? kKeysFile : kValuesFile;
    e.bytes = h.n_bytes();
    e.sha256 = to_hex(h.finish());
  }
}

void write_snapshot(const Snapshot& s, const std::string& dir, bool force) {
  check_cache_shape(s, dir);
  if (s.cache.n_pos != s.manifest.geometry.positions)
    fail_field(dir, "geometry.positions", std::to_string(s.cache.n_pos) + " (cache cursor)",
               std::to_string(s.manifest.geometry.positions));
  s.manifest.validate(dir + " (manifest to write)");
  remove_stale_temporaries(dir);
  AtomicDirectory out(dir, force);
  for (bool k : {true, false}) {
    const PayloadEntry& e = k ? s.manifest.keys : s.manifest.values;
    auto f = out.create(k ? kKeysFile : kValuesFile);
    HashingSink h(&f->sink());
    write_payload(s.cache, k, h);
    const std::string got = to_hex(h.finish());
    if (got != e.sha256)
      fail_field(dir, std::string("payload.") + (k ? "keys" : "values") + ".sha256",
                 e.sha256 + " (sealed manifest)",
                 got + " (cache bytes; a modified cache is not a native snapshot)");
    f->commit();
  }
  // The manifest last: a temporary directory without it is never mistaken for a snapshot.
  auto mf = out.create(kManifestFile);
  mf->sink().write(s.manifest.to_json());
  mf->commit();
  out.commit();
}

SnapshotManifest read_manifest(const std::string& dir) {
  const std::string path = join(dir, kManifestFile);
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) fail_field(path, "manifest", "a regular file", "missing");
  if (!S_ISREG(st.st_mode)) fail_field(path, "manifest", "a regular file", "something else");
  return SnapshotManifest::from_json(read_file(path, kMaxManifestBytes), path);
}

Snapshot read_snapshot(const std::string& dir) {
  check_entries(dir);
  Snapshot s;
  s.manifest = read_manifest(dir);
  const SnapshotManifest& m = s.manifest;
  const uint64_t bytes = m.payload_bytes();
  // Both sizes are checked before anything of their size is allocated.
  const std::string kpath = join(dir, kKeysFile), vpath = join(dir, kValuesFile);
  const int kfd = open_payload(kpath, "payload.keys", bytes);
  int vfd = -1;
  try {
    vfd = open_payload(vpath, "payload.values", bytes);
  } catch (...) {
    ::close(kfd);
    throw;
  }
  struct Closer {
    int a, b;
    ~Closer() { ::close(a); ::close(b); }
  } closer{kfd, vfd};
  const Geometry& g = m.geometry;
  s.cache = model::KvCache(g.layers, g.kv_heads, g.head_dim, g.positions);
  s.cache.n_pos = g.positions;
  check_hash(kpath, "payload.keys.sha256", m.keys.sha256,
             read_and_hash(kfd, kpath, reinterpret_cast<uint8_t*>(s.cache.k.data()), bytes));
  check_hash(vpath, "payload.values.sha256", m.values.sha256,
             read_and_hash(vfd, vpath, reinterpret_cast<uint8_t*>(s.cache.v.data()), bytes));
  return s;
}

VerifyReport verify_snapshot(const std::string& dir) {
  VerifyReport r;
  r.path = dir;
  auto run = [&](const std::string& name, auto&& fn) {
    VerifyCheck c{name, "ok", ""};
    if (!r.error.empty()) {
      c.status = "skipped";
    } else {
      try {
        fn();
      } catch (const Error& e) {
        c.status = "failed";
        c.detail = e.what();
        r.error = e.what();
      }
    }
    r.checks.push_back(std::move(c));
  };
  run("directory", [&] { check_entries(dir); });
  run("manifest", [&] {
    r.manifest = read_manifest(dir);
    r.manifest_ok = true;
  });
  const uint64_t bytes = r.manifest_ok ? r.manifest.payload_bytes() : 0;
  for (bool k : {true, false}) {
    const std::string field = k ? "payload.keys" : "payload.values";
    const std::string path = join(dir, k ? kKeysFile : kValuesFile);
    int fd = -1;
    run(field + ".bytes", [&] { fd = open_payload(path, field, bytes); });
    run(field + ".sha256", [&] {
      const std::string got = read_and_hash(fd, path, nullptr, bytes);
      check_hash(path, (field + ".sha256").c_str(), (k ? r.manifest.keys : r.manifest.values).sha256, got);
    });
    if (fd >= 0) ::close(fd);
  }
  r.ok = r.error.empty();
  return r;
}

nlohmann::ordered_json VerifyReport::to_json() const {
  ordered_json j;
  j["path"] = path;
  j["result"] = ok ? "ok" : "failed";
  ordered_json cs = ordered_json::array();
  for (const auto& c : checks) {
    ordered_json o = {{"check", c.name}, {"status", c.status}};
    if (!c.detail.empty()) o["detail"] = c.detail;
    cs.push_back(o);
  }
  j["checks"] = cs;
  if (manifest_ok) {
    j["positions"] = manifest.geometry.positions;
    j["resume"] = {{"token", manifest.resume.token}, {"position", manifest.resume.position}};
    j["model_identity"] = manifest.model.identity;
  }
  if (!ok) j["error"] = error;
  return j;
}

}  // namespace ember::kv
