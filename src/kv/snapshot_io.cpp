// The one payload reader and the one payload serializer, the one reader and writer of snapshot
// directories (ember.kv-snapshot.v1 and its mapped and foreign extensions), seal, and verify.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "kv/state.h"
#include "kv/strict_json.h"
#include "kv/kvc1_snapshot.h"
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

const PayloadEntry& entry_of(const SnapshotManifest& m, Payload p) {
  return p == Payload::keys ? m.keys : m.values;
}

// The cache agrees with the geometry (layers, kv_heads, head_dim) and is well formed; with
// `positions`, n_pos must also equal the manifest's positions.
void check_cache_shape(const Geometry& g, const model::KvCache& c, const std::string& where,
                       bool positions) {
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
  if (positions && c.n_pos != g.positions)
    fail_field(where, "geometry.positions", std::to_string(c.n_pos) + " (cache cursor)",
               std::to_string(g.positions));
}

struct Fd {
  int fd = -1;
  Fd() = default;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

const char* entry_field(const char* name) {
  return name == kKeysFile ? "payload.keys" : name == kValuesFile ? "payload.values" : "manifest";
}

std::string not_regular(unsigned mode) {
  return S_ISLNK(mode) ? "a symbolic link (links are never followed)" : describe_file_type(mode);
}

// Opens one entry of the directory: never through a link, never blocking, a regular file only.
int open_entry(const std::string& path, const std::string& field, uint64_t* size) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 && errno == ENOENT) fail_field(path, field, "a regular file", "missing");
  try {
    return open_regular_file(path, size, /*follow_symlinks=*/false);
  } catch (const Error& e) {
    // Replaced since the listing: name what is there now, else open_regular_file's reason.
    if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
      fail_field(path, field, "a regular file", not_regular(st.st_mode));
    std::string what = e.what();
    if (what.rfind(path + ": ", 0) == 0) what = what.substr(path.size() + 2);
    fail_field(path, field, "a regular file", what);
  }
}

// Opens a payload and checks that it holds exactly `bytes` (before anything is allocated).
int open_payload(const std::string& path, const std::string& field, uint64_t bytes) {
  uint64_t size = 0;
  const int fd = open_entry(path, field, &size);
  if (size != bytes) {
    ::close(fd);
    fail_field(path, field + ".bytes", std::to_string(bytes) + " (manifest)",
               std::to_string(size) + (size < bytes ? " (truncated)" : " (extended)"));
  }
  return fd;
}

// Reads exactly n bytes from fd into dst (or through a 1 MiB buffer when dst is null),
// passing every byte read to `sink`.
void read_exact(int fd, const std::string& path, uint8_t* dst, uint64_t n, ByteSink& sink) {
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
    sink.write(p, size_t(r));
    got += uint64_t(r);
  }
}

// A payload file as a ByteSource: reads straight into the caller's rows.
class FdSource final : public ByteSource {
 public:
  FdSource(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  void read(void* dst, size_t n) override {
    CountingSink none;
    read_exact(fd_, path_, static_cast<uint8_t*>(dst), n, none);
  }

 private:
  int fd_;
  std::string path_;
};

// Exactly the three fixed names; anything else (a stray file, a directory) is refused.
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
  // Each present entry is a regular file, not a link to one (open_entry checks again on the
  // descriptor; a missing one is named when it is opened).
  for (const char* name : {kManifestFile, kKeysFile, kValuesFile}) {
    const std::string path = join(dir, name);
    if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
      fail_field(path, entry_field(name), "a regular file", not_regular(st.st_mode));
  }
}

std::string read_manifest_text(const std::string& path) {
  Fd f;
  uint64_t size = 0;
  f.fd = open_entry(path, "manifest", &size);
  if (size > kMaxManifestBytes)
    fail_field(path, "size", "at most " + std::to_string(kMaxManifestBytes) + " bytes", std::to_string(size) + " bytes");
  std::string text(size_t(size), '\0');
  CountingSink counted;
  read_exact(f.fd, path, reinterpret_cast<uint8_t*>(text.data()), size, counted);
  return text;
}

void check_stream_hash(PayloadCheck& c, const std::string& want, const std::string& where,
                       const std::string& field, const std::string& want_label, const std::string& found_label) {
  const std::string got = c.sha256();
  if (got != want) fail_field(where, field + ".sha256", want + " " + want_label, got + " " + found_label);
}

void check_stream_finite(const PayloadCheck& c, const std::string& where, const std::string& field) {
  if (!c.first_non_finite().empty())
    fail_field(where, field, "finite f16 values (exponent bits not all ones)", c.first_non_finite());
}

}  // namespace

// ---- the payload serializer and its checks ----------------------------------------------------

void write_payload(const model::KvCache& c, Payload which, ByteSink& out, int layer_begin, int layer_end) {
  if (layer_end < 0) layer_end = c.n_layers;
  EMBER_CHECK(layer_begin >= 0 && layer_begin <= layer_end && layer_end <= c.n_layers);
  const size_t row = size_t(c.n_pos) * size_t(c.head_dim) * sizeof(uint16_t);
  if (row == 0) return;
  for (int l = layer_begin; l < layer_end; ++l)
    for (int h = 0; h < c.n_kv_heads; ++h)
      out.write(which == Payload::keys ? c.k_row(l, h, 0) : c.v_row(l, h, 0), row);
}

void PayloadCheck::note(uint16_t v, uint64_t index) {
  if ((v & 0x7c00) != 0x7c00 || !bad_.empty()) return;
  char hex[8];
  std::snprintf(hex, sizeof hex, "%04x", unsigned(v));
  const std::string what = (v & 0x03ff) ? "NaN" : (v & 0x8000) ? "-Inf" : "+Inf";
  const uint64_t d = uint64_t(std::max(g_.head_dim, 1)), p = uint64_t(std::max(g_.positions, 1)),
                 h = uint64_t(std::max(g_.kv_heads, 1));
  bad_ = what + " (f16 0x" + hex + ") at layer " + std::to_string(index / (d * p * h)) + ", kv_head " +
         std::to_string(index / (d * p) % h) + ", position " + std::to_string(index / d % p) + ", dim " +
         std::to_string(index % d);
}

void PayloadCheck::write(const void* data, size_t n) {
  if (inner_) inner_->write(data, n);
  hash_.update(data, n);
  n_bytes_ += n;
  const auto* b = static_cast<const uint8_t*>(data);
  size_t i = 0;
  if (carry_ >= 0 && n > 0) {  // the high byte of a value split across two writes
    note(uint16_t(carry_ | (b[0] << 8)), values_++);
    carry_ = -1;
    i = 1;
  }
  const size_t pairs = (n - i) / 2;
  if (bad_.empty())
    for (size_t k = 0; k < pairs; ++k) {
      const uint16_t v = uint16_t(b[i + 2 * k] | (b[i + 2 * k + 1] << 8));
      if ((v & 0x7c00) == 0x7c00) {
        note(v, values_ + k);
        break;
      }
    }
  values_ += pairs;
  i += 2 * pairs;
  if (i < n) carry_ = b[i];
}

std::string PayloadCheck::sha256() { return to_hex(hash_.finish()); }

void check_payload_stream(PayloadCheck& c, const std::string& want, const std::string& where,
                          const std::string& field, const std::string& want_label,
                          const std::string& found_label, bool allow_non_finite) {
  check_stream_hash(c, want, where, field, want_label, found_label);
  if (!allow_non_finite) check_stream_finite(c, where, field);
}

namespace {

// Fills geometry.positions, prefix.sha256 and the payload entries (sizes, hashes) from the cache;
// returns whether every value is finite.
bool seal_manifest(SnapshotManifest& m, const model::KvCache& c, const std::string& where) {
  bool finite = true;
  check_cache_shape(m.geometry, c, where, /*positions=*/false);
  m.geometry.positions = c.n_pos;
  m.prefix.sha256 = prefix_hash(m.prefix.tokens);
  for (Payload p : {Payload::keys, Payload::values}) {
    PayloadCheck chk(m.geometry);
    write_payload(c, p, chk);
    PayloadEntry& e = p == Payload::keys ? m.keys : m.values;
    e = {payload_file(p), chk.n_bytes(), chk.sha256()};
    finite = finite && chk.first_non_finite().empty();
  }
  return finite;
}

}  // namespace

VerifiedState seal(KvState s, const std::string& where, const std::string& sign_key_pem) {
  s.manifest.format = kSnapshotFormat;
  const bool finite = seal_manifest(s.manifest, s.cache, where);
  s.manifest.signature.reset();
  if (!sign_key_pem.empty()) sign_manifest(s, sign_key_pem);
  std::string text = state_manifest_json(s, where);  // validates the manifest and its provenance
  s.manifest.seal = state_seal(s);
  return StateVerifier::make(std::move(s), std::move(text), finite);
}

VerifiedState resign(VerifiedState v, const std::string& sign_key_pem) {
  const bool finite = v.finite();
  KvState s = std::move(v).release();
  sign_manifest(s, sign_key_pem);
  std::string text = state_manifest_json(s, "signed state");
  return StateVerifier::make(std::move(s), std::move(text), finite);
}

VerifiedState with_signature(VerifiedState v, const Ed25519Signature& signature) {
  const bool finite = v.finite();
  KvState s = std::move(v).release();
  s.manifest.signature = signature;
  std::string text = state_manifest_json(s, "signed state");  // refuses a signature of another seal
  return StateVerifier::make(std::move(s), std::move(text), finite);
}

// ---- the one payload reader ----------------------------------------------------------------------

VerifiedState read_payloads(StateHeader header, std::string manifest_text, ByteSource& keys, ByteSource& values,
                            const PayloadReadOptions& o) {
  KvState s;
  static_cast<StateHeader&>(s) = std::move(header);
  const SnapshotManifest& m = s.manifest;
  const Geometry& g = m.geometry;
  const int capacity = std::max(o.capacity, g.positions);
  s.cache = model::KvCache(g.layers, g.kv_heads, g.head_dim, capacity);
  s.cache.n_pos = g.positions;
  // Layer by layer, K then V: the order of a KVC1 file, and any order suits two descriptors.
  PayloadCheck kchk(g), vchk(g);
  const size_t row = size_t(g.positions) * size_t(g.head_dim) * sizeof(uint16_t);
  for (int l = 0; l < g.layers; ++l)
    for (Payload p : {Payload::keys, Payload::values})
      for (int h = 0; h < g.kv_heads; ++h) {
        uint16_t* dst = p == Payload::keys ? s.cache.k_row(l, h, 0) : s.cache.v_row(l, h, 0);
        (p == Payload::keys ? keys : values).read(dst, row);
        (p == Payload::keys ? kchk : vchk).write(dst, row);
      }
  for (Payload p : {Payload::keys, Payload::values})
    check_payload_stream(p == Payload::keys ? kchk : vchk, entry_of(m, p).sha256,
                         p == Payload::keys ? o.keys_where : o.values_where,
                         p == Payload::keys ? o.keys_field : o.values_field, "(manifest)",
                         o.found_label, o.allow_non_finite);
  const bool finite = kchk.first_non_finite().empty() && vchk.first_non_finite().empty();
  return StateVerifier::make(std::move(s), std::move(manifest_text), finite);
}

// ---- the directory reader and writer ---------------------------------------------------------

StateDirHeader read_state_header(const std::string& dir, Accept accept) {
  check_entries(dir);
  const std::string path = join(dir, kManifestFile);
  StateDirHeader s;
  s.manifest_text = read_manifest_text(path);
  s.header = parse_state_manifest(s.manifest_text, path);
  require_kind(s.header, accept, path);
  return s;
}

VerifiedState read_state_dir(const std::string& dir, const ReadOptions& options) {
  StateDirHeader h = read_state_header(dir, options.accept);
  const uint64_t bytes = h.header.manifest.payload_bytes();
  // Both sizes are checked before anything of their size is allocated.
  Fd fds[2];
  for (Payload p : {Payload::keys, Payload::values})
    fds[int(p)].fd = open_payload(join(dir, payload_file(p)), payload_field(p), bytes);
  FdSource keys(fds[0].fd, join(dir, kKeysFile)), values(fds[1].fd, join(dir, kValuesFile));
  PayloadReadOptions ro;
  ro.allow_non_finite = options.allow_non_finite;
  ro.capacity = options.capacity;
  ro.keys_where = join(dir, kKeysFile);
  ro.values_where = join(dir, kValuesFile);
  return read_payloads(std::move(h.header), std::move(h.manifest_text), keys, values, ro);
}

void write_state_dir(const VerifiedState& v, const std::string& dir, bool force) {
  const KvState& s = v.state();
  // --force replaces only a state directory (any of the three kinds): the same three entries.
  AtomicDirectory out(dir,
                      DirectoryKind::fixed("an ember snapshot, mapped or foreign cache directory",
                                           {kManifestFile, kKeysFile, kValuesFile}),
                      force);
  for (Payload p : {Payload::keys, Payload::values}) {
    auto f = out.create(payload_file(p));
    // The hash is computed over exactly the bytes written: a cache that is not the sealed one
    // (a bug upstream) is refused, leaving nothing; so is a non-finite value, by its coordinates.
    PayloadCheck chk(s.manifest.geometry, &f->sink());
    write_payload(s.cache, p, chk);
    check_payload_stream(chk, entry_of(s.manifest, p).sha256, join(dir, payload_file(p)), payload_field(p),
                         "(sealed manifest)", "(cache bytes; a modified cache is not the state its manifest seals)",
                         /*allow_non_finite=*/false);
    f->commit();
  }
  // The manifest last: a temporary directory without it is never mistaken for a snapshot.
  auto mf = out.create(kManifestFile);
  mf->sink().write(v.manifest_text());
  mf->commit();
  out.commit();
}

std::string state_kind(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  if (S_ISDIR(st.st_mode)) return "snapshot-dir";
  if (S_ISREG(st.st_mode)) {
    Fd f;
    f.fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    char magic[4] = {};
    if (f.fd >= 0 && ::read(f.fd, magic, 4) == 4 && std::memcmp(magic, "KVC1", 4) == 0) return "kvc1";
  }
  return "";
}

VerifiedState open_state(const std::string& path, const ReadOptions& options) {
  const std::string kind = state_kind(path);
  if (kind == "snapshot-dir") return read_state_dir(path, options);
  if (kind == "kvc1") return read_kvc1_state(path, options);
  fail_field(path, "state", "a snapshot directory or a KVC1 file", "neither (missing or unknown)");
}

VerifyReport verify_snapshot(const std::string& dir, Accept accept, bool allow_foreign) {
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
    const std::string path = join(dir, kManifestFile);
    const StateHeader s = parse_state_manifest(read_manifest_text(path), path);
    if (!(allow_foreign && s.is_foreign())) require_kind(s, accept, path);
    r.manifest = s.manifest;
    if (s.foreign()) r.foreign = *s.foreign();
    r.manifest_ok = true;
  });
  const uint64_t bytes = r.manifest_ok ? r.manifest.payload_bytes() : 0;
  for (Payload p : {Payload::keys, Payload::values}) {
    const std::string field = payload_field(p);
    const std::string path = join(dir, payload_file(p));
    Fd fd;
    PayloadCheck chk(r.manifest.geometry);
    run(field + ".bytes", [&] { fd.fd = open_payload(path, field, bytes); });
    run(field + ".sha256", [&] {
      read_exact(fd.fd, path, nullptr, bytes, chk);
      check_stream_hash(chk, entry_of(r.manifest, p).sha256, path, field, "(manifest)", "(payload bytes)");
    });
    run(field + ".finite", [&] { check_stream_finite(chk, path, field); });
  }
  r.ok = r.error.empty();
  return r;
}

nlohmann::ordered_json state_summary_json(const SnapshotManifest& m) {
  ordered_json j;
  j["positions"] = m.geometry.positions;
  j["resume"] = {{"token", m.resume.token}, {"position", m.resume.position}};
  j["model_identity"] = m.model.identity;
  j["prefix_sha256"] = m.prefix.sha256;
  j["payload"] = {{"keys_sha256", m.keys.sha256}, {"values_sha256", m.values.sha256}};
  j["seal"] = m.seal;
  j["signer"] = m.signature ? ordered_json(m.signature->public_key) : ordered_json(nullptr);
  return j;
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
    j.update(state_summary_json(manifest));
    if (foreign) j["foreign"] = foreign->to_json();
  }
  if (!ok) j["error"] = error;
  return j;
}

}  // namespace ember::kv
