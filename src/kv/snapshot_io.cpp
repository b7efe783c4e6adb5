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

PayloadCheck::PayloadCheck(const SnapshotManifest& m, ByteSink* inner)
    : g_(m.geometry), blocked_(m.version >= 2), inner_(inner) {}

PayloadCheck::~PayloadCheck() = default;

void PayloadCheck::write(const void* data, size_t n) {
  if (inner_) inner_->write(data, n);
  if (blocked_)
    hash_blocks(static_cast<const uint8_t*>(data), n);
  else
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

// Routes bytes at stream offset n_bytes_ (before this write) to their (layer, block) hasher:
// a head's row of layer l is P * head_dim values, and block b of it is positions [16b, 16b + 16).
void PayloadCheck::hash_blocks(const uint8_t* b, size_t n) {
  const uint64_t row = uint64_t(std::max(g_.positions, 0)) * uint64_t(std::max(g_.head_dim, 0)) * 2;
  const uint64_t layer_bytes = row * uint64_t(std::max(g_.kv_heads, 0));
  const uint64_t piece = uint64_t(kProofBlockPositions) * uint64_t(std::max(g_.head_dim, 0)) * 2;
  if (layer_bytes == 0) {
    hash_.update(b, n);  // no geometry (a manifest that failed): the hash only has to differ
    return;
  }
  uint64_t off = n_bytes_;
  while (n > 0) {
    const int l = int(off / layer_bytes);
    if (l != layer_) {
      finish_layer();
      layer_ = l;
      for (int k = 0; k < proof_blocks_per_layer(g_.positions); ++k) open_.push_back(std::make_unique<Sha256>());
    }
    const uint64_t in_row = off % layer_bytes % row;
    const uint64_t blk = in_row / piece;
    const size_t take = size_t(std::min<uint64_t>(n, std::min(row, (blk + 1) * piece) - in_row));
    open_[size_t(blk)]->update(b, take);
    b += take;
    n -= take;
    off += take;
  }
}

void PayloadCheck::finish_layer() {
  for (auto& h : open_) {
    blocks_.push_back(h->finish());
    hash_.update(blocks_.back().data(), blocks_.back().size());
  }
  open_.clear();
}

std::string PayloadCheck::sha256() {
  if (!finished_) {
    finished_ = true;
    if (blocked_) finish_layer();
    hex_ = to_hex(hash_.finish());
  }
  return hex_;
}

std::vector<std::string> proof_blocks(const PayloadCheck& keys, const PayloadCheck& values) {
  const std::vector<Digest>& k = keys.block_digests();
  const std::vector<Digest>& v = values.block_digests();
  std::vector<std::string> out;
  out.reserve(std::min(k.size(), v.size()));
  for (size_t i = 0; i < k.size() && i < v.size(); ++i) {
    Sha256 h;
    h.update(k[i].data(), k[i].size());
    h.update(v[i].data(), v[i].size());
    out.push_back(to_hex(h.finish()));
  }
  return out;
}

std::string proof_block_name(const Geometry& g, size_t index) {
  const size_t per = size_t(std::max(proof_blocks_per_layer(g.positions), 1));
  const int b = int(index % per);
  const int first = b * kProofBlockPositions;
  const int last = std::min(first + kProofBlockPositions, g.positions) - 1;
  return "layer " + std::to_string(index / per) + ", block " + std::to_string(b) + " (positions " +
         std::to_string(first) + "-" + std::to_string(last) + ")";
}

void check_proof_blocks(const SnapshotManifest& m, PayloadCheck& keys, PayloadCheck& values,
                        const std::string& keys_where, const std::string& values_where,
                        const std::string& found_label) {
  if (m.version < 2) return;
  // Which payload holds the difference: the one whose own hash is not the manifest's.
  const bool k_bad = keys.sha256() != m.keys.sha256;
  const bool v_bad = values.sha256() != m.values.sha256;
  const std::vector<std::string> got = proof_blocks(keys, values);
  const std::vector<std::string>& want = m.proof.blocks;
  const std::string rows = k_bad && v_bad ? "K and V rows" : v_bad ? "V rows" : "K rows";
  for (size_t i = 0; i < want.size() && i < got.size(); ++i)
    if (got[i] != want[i])
      fail_field(!k_bad && v_bad ? values_where : keys_where, "proof.blocks[" + std::to_string(i) + "]",
                 want[i] + " (manifest)",
                 got[i] + " " + found_label + ": " + rows + " of " + proof_block_name(m.geometry, i));
  if (got.size() != want.size())
    fail_field(keys_where, "proof.blocks", std::to_string(want.size()) + " blocks (manifest)",
               std::to_string(got.size()) + " " + found_label);
}

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
  m.version = kSnapshotVersion;  // a state sealed again (a v1 state changed) is written as v2
  m.proof.block_positions = kProofBlockPositions;
  PayloadCheck kchk(m), vchk(m);
  for (Payload p : {Payload::keys, Payload::values}) {
    PayloadCheck& chk = p == Payload::keys ? kchk : vchk;
    write_payload(c, p, chk);
    PayloadEntry& e = p == Payload::keys ? m.keys : m.values;
    e = {payload_file(p), chk.n_bytes(), chk.sha256()};
    finite = finite && chk.first_non_finite().empty();
  }
  m.proof.blocks = proof_blocks(kchk, vchk);
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
  PayloadCheck kchk(m), vchk(m);
  const size_t row = size_t(g.positions) * size_t(g.head_dim) * sizeof(uint16_t);
  for (int l = 0; l < g.layers; ++l)
    for (Payload p : {Payload::keys, Payload::values})
      for (int h = 0; h < g.kv_heads; ++h) {
        uint16_t* dst = p == Payload::keys ? s.cache.k_row(l, h, 0) : s.cache.v_row(l, h, 0);
        (p == Payload::keys ? keys : values).read(dst, row);
        (p == Payload::keys ? kchk : vchk).write(dst, row);
      }
  // The hashes first (the payload's, then each block's against the manifest): a block that
  // differs is named by its layer and positions before the payload's hash is.
  check_proof_blocks(m, kchk, vchk, o.keys_where, o.values_where, o.found_label);
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
    PayloadCheck chk(s.manifest, &f->sink());
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
  // Both payloads are streamed before their hashes are judged, so that a version 2 snapshot's
  // difference is named by its block (layer, positions) first.
  Fd fds[2];
  PayloadCheck kchk(r.manifest), vchk(r.manifest);
  PayloadCheck* chk[2] = {&kchk, &vchk};
  for (Payload p : {Payload::keys, Payload::values})
    run(std::string(payload_field(p)) + ".bytes",
        [&] { fds[int(p)].fd = open_payload(join(dir, payload_file(p)), payload_field(p), bytes); });
  run("proof.blocks", [&] {
    for (Payload p : {Payload::keys, Payload::values})
      read_exact(fds[int(p)].fd, join(dir, payload_file(p)), nullptr, bytes, *chk[int(p)]);
    check_proof_blocks(r.manifest, kchk, vchk, join(dir, kKeysFile), join(dir, kValuesFile), "(payload bytes)");
  });
  if (r.error.empty() && r.manifest.version < 2) r.checks.back().status = "skipped";  // no blocks in v1
  for (Payload p : {Payload::keys, Payload::values}) {
    const std::string field = payload_field(p);
    const std::string path = join(dir, payload_file(p));
    run(field + ".sha256", [&] {
      check_stream_hash(*chk[int(p)], entry_of(r.manifest, p).sha256, path, field, "(manifest)", "(payload bytes)");
    });
    run(field + ".finite", [&] { check_stream_finite(*chk[int(p)], path, field); });
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
  j["witness_tokens"] = m.proof.witness_tokens.size();  // 0: none recorded
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
