// The store's layout, its put (chunks, then the entry, create-only), its get (every chunk and
// the seal verified before anything is returned), and ls/verify/gc/stats over one catalog.
#include "store/store.h"

#include <algorithm>
#include <cstring>
#include <ctime>
#include <set>

#include "kv/strict_json.h"
#include "util/byte_io.h"
#include "util/error.h"
#include "util/sha256.h"

namespace ember::store {
namespace {

constexpr size_t kMaxEntryBytes = size_t(256) << 20;  // manifest (<= 64 MiB, escaped) + chunk lists
constexpr size_t kMaxSmallValue = 128;                // a seal, a pending time

bool is_hex(const std::string& s, size_t n) {
  if (s.size() != n) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

int64_t now_s(int64_t now) { return now != 0 ? now : int64_t(std::time(nullptr)); }

// The i-th component of a key ("ember:v1:s:{SEAL}:chunk:SHA" -> 3 is "{SEAL}").
std::string component(const std::string& key, size_t i) {
  size_t b = 0;
  for (size_t k = 0; k < i; ++k) {
    b = key.find(':', b);
    if (b == std::string::npos) return "";
    ++b;
  }
  const size_t e = key.find(':', b);
  return key.substr(b, e == std::string::npos ? std::string::npos : e - b);
}

std::string untag(const std::string& c) {
  return c.size() >= 2 && c.front() == '{' && c.back() == '}' ? c.substr(1, c.size() - 2) : "";
}

// Cuts a payload stream into chunks and stores each under its SHA-256.
class ChunkSink final : public ByteSink {
 public:
  ChunkSink(Backend& b, std::string seal, size_t chunk_bytes, bool only_missing)
      : b_(b), seal_(std::move(seal)), chunk_bytes_(chunk_bytes), only_missing_(only_missing) {
    buf_.reserve(chunk_bytes);
  }
  void write(const void* data, size_t n) override {
    const auto* p = static_cast<const uint8_t*>(data);
    n_bytes_ += n;
    while (n > 0) {
      const size_t take = std::min(n, chunk_bytes_ - buf_.size());
      buf_.append(reinterpret_cast<const char*>(p), take);
      p += take;
      n -= take;
      if (buf_.size() == chunk_bytes_) flush();
    }
  }
  using ByteSink::write;
  void finish() {
    if (!buf_.empty()) flush();
  }
  std::vector<std::string> shas;
  size_t written = 0;

 private:
  void flush() {
    const std::string sha = sha256_hex(buf_);
    const std::string key = KeyLayout::chunk(seal_, sha);
    // Chunks are replaced, not created: a corrupted copy of a content-addressed chunk is
    // repaired by the next put of the same state. Under only_missing (the entry exists), a
    // chunk already holding exactly these bytes is left alone.
    bool write = true;
    if (only_missing_) {
      const std::optional<std::string> cur = b_.get(key, buf_.size());
      write = !cur || *cur != buf_;
    }
    if (write) {
      b_.replace(key, buf_);
      ++written;
    }
    shas.push_back(sha);
    buf_.clear();
  }
  Backend& b_;
  std::string seal_;
  size_t chunk_bytes_;
  bool only_missing_;
  std::string buf_;
};

std::string entry_json(const Entry& e) {
  nlohmann::ordered_json j;
  j["format"] = kEntryFormat;
  j["version"] = kEntryVersion;
  j["seal"] = e.seal;
  j["namespace"] = e.ns;
  j["stored_at"] = e.stored_at;
  j["chunk_bytes"] = e.chunk_bytes;
  j["chunks"] = {{"keys", e.chunks[0]}, {"values", e.chunks[1]}};
  j["manifest"] = e.manifest_text;
  return canonical_json(nlohmann::json(j));
}

uint64_t chunk_count(uint64_t bytes, uint64_t chunk) { return (bytes + chunk - 1) / chunk; }

}  // namespace

bool valid_name(const std::string& n) {
  if (n.empty() || n.size() > 128 || n[0] == '.') return false;
  for (char c : n)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
          c == '-'))
      return false;
  return true;
}

std::string namespace_of(const kv::SnapshotManifest& m) {
  Sha256 h;
  h.update_field("ember.store-namespace.v1");
  h.update_field(m.model.identity);
  h.update_field(m.tokenizer.identity);
  h.update_field(m.numerics.contract);
  h.update_field(m.numerics.engine_fingerprint);
  return to_hex(h.finish()).substr(0, 32);
}

std::vector<std::string> prefix_chain(const std::string& ns, std::span<const int32_t> tokens) {
  Sha256 h0;
  h0.update_field("ember.prefix-chain.v1");
  h0.update_field(ns);
  Digest prev = h0.finish();
  std::vector<std::string> out;
  for (size_t b = 0; (b + 1) * kPrefixBlock <= tokens.size(); ++b) {
    Sha256 h;
    h.update(prev.data(), prev.size());
    for (int i = 0; i < kPrefixBlock; ++i) {
      const int32_t id = tokens[b * kPrefixBlock + size_t(i)];
      const uint8_t le[4] = {uint8_t(id), uint8_t(id >> 8), uint8_t(id >> 16), uint8_t(uint32_t(id) >> 24)};
      h.update(le, 4);
    }
    prev = h.finish();
    out.push_back(to_hex(prev));
  }
  return out;
}

std::string KeyLayout::entry(const std::string& s) { return "ember:v1:s:{" + s + "}:entry"; }
std::string KeyLayout::chunk(const std::string& s, const std::string& sha) { return "ember:v1:s:{" + s + "}:chunk:" + sha; }
std::string KeyLayout::pending(const std::string& s) { return "ember:v1:s:{" + s + "}:pending"; }
std::string KeyLayout::hits(const std::string& s) { return "ember:v1:s:{" + s + "}:hits"; }
std::string KeyLayout::name(const std::string& ns, const std::string& n) { return "ember:v1:n:{" + ns + "}:name:" + n; }
std::string KeyLayout::prefix(const std::string& ns, const std::string& h) { return "ember:v1:n:{" + ns + "}:prefix:" + h; }

// ---- put -------------------------------------------------------------------------------------

PutResult Store::put(const kv::VerifiedState& v, const PutOptions& o) {
  const std::string where = uri() + " (put)";
  if (!o.name.empty() && !valid_name(o.name)) fail_field(where, "name", "[A-Za-z0-9._-]{1,128}", "'" + o.name + "'");
  if (o.chunk_bytes < kMinChunkBytes || o.chunk_bytes > kMaxChunkBytes || o.chunk_bytes % 2 != 0)
    fail_field(where, "chunk_bytes", "an even size in [4096, 16 MiB]", std::to_string(o.chunk_bytes));
  // A verified state: its cache is the one its manifest seals (no hash pass here); the store
  // holds ember's own states only (a mapped or foreign cache has no prefix a lookup could trust).
  kv::require_kind(v.header(), kv::Accept::native, where);
  if (!v.finite()) fail_field(where, "payload", "finite f16 values", "non-finite values");
  const kv::KvState& s = v.state();
  const kv::SnapshotManifest& m = s.manifest;
  const std::string& text = v.manifest_text();
  PutResult r;
  r.seal = m.seal;
  r.ns = namespace_of(m);
  const uint64_t bytes = m.payload_bytes();
  if (chunk_count(bytes, o.chunk_bytes) > kMaxChunksPerPayload)
    fail_field(where, "chunk_bytes", "at most 2^20 chunks per payload (a larger --chunk-bytes)",
               std::to_string(chunk_count(bytes, o.chunk_bytes)) + " chunks");

  const bool present = b_->exists(KeyLayout::entry(r.seal));
  Entry e;
  e.seal = r.seal;
  e.ns = r.ns;
  e.stored_at = now_s(0);
  e.chunk_bytes = o.chunk_bytes;
  e.manifest_text = text;
  if (present) {
    // The same state again: a no-op, except that chunks lost (evicted) or corrupted since are
    // rewritten, with the layout the stored record names.
    const Entry old = read_entry(r.seal);
    for (kv::Payload p : {kv::Payload::keys, kv::Payload::values}) {
      ChunkSink sink(*b_, r.seal, size_t(old.chunk_bytes), /*only_missing=*/true);
      kv::write_payload(s.cache, p, sink);
      sink.finish();
      if (sink.shas != old.chunks[int(p)])
        fail_field(KeyLayout::entry(r.seal), kv::payload_field(p), "the chunks of this state", "other chunks");
      r.chunks += sink.shas.size();
      r.chunks_written += sink.written;
    }
  } else {
    b_->replace(KeyLayout::pending(r.seal), std::to_string(e.stored_at));
    for (kv::Payload p : {kv::Payload::keys, kv::Payload::values}) {
      ChunkSink sink(*b_, r.seal, o.chunk_bytes, /*only_missing=*/false);
      kv::write_payload(s.cache, p, sink);
      sink.finish();
      e.chunks[int(p)] = std::move(sink.shas);
      r.chunks += e.chunks[int(p)].size();
      r.chunks_written += sink.written;
    }
    // The entry last and create-only: a reader sees the whole state or none; of two writers
    // of the same state one creates it and the other finds it (the same seal: a no-op).
    r.stored = b_->create(KeyLayout::entry(r.seal), entry_json(e));
    b_->remove(KeyLayout::pending(r.seal));
    if (!r.stored) read_entry(r.seal);  // the other writer's record must be valid too
  }
  if (!o.name.empty()) {
    const std::string key = KeyLayout::name(r.ns, o.name);
    if (!b_->create(key, r.seal)) {
      const std::optional<std::string> cur = b_->get(key, kMaxSmallValue);
      if (!cur || *cur != r.seal) {
        if (!o.force)
          fail_field(uri(), "name " + r.ns + "/" + o.name, "a new name (--force points it at this state)",
                     "a name for state " + (cur ? *cur : std::string("?")));
        b_->replace(key, r.seal);
      }
    }
  }
  for (const std::string& h : prefix_chain(r.ns, m.prefix.tokens))
    if (b_->create(KeyLayout::prefix(r.ns, h), r.seal)) ++r.prefix_keys;
  return r;
}

// ---- get -------------------------------------------------------------------------------------

std::string Store::resolve(const std::string& ref) {
  if (is_hex(ref, 64)) {
    if (!b_->exists(KeyLayout::entry(ref))) fail_field(uri(), "state " + ref, "a stored state", "none");
    return ref;
  }
  const size_t slash = ref.find('/');
  if (slash == std::string::npos || !is_hex(ref.substr(0, slash), 32) || !valid_name(ref.substr(slash + 1)))
    fail_field(uri(), "reference", "NAMESPACE/NAME (as ls prints) or a seal (64 hex digits)", "'" + ref + "'");
  const std::string key = KeyLayout::name(ref.substr(0, slash), ref.substr(slash + 1));
  const std::optional<std::string> v = b_->get(key, kMaxSmallValue);
  if (!v) fail_field(uri(), "name " + ref, "a stored name", "none");
  if (!is_hex(*v, 64)) fail_field(uri(), key, "a seal (64 hex digits)", "'" + *v + "'");
  return *v;
}

Entry Store::read_entry(const std::string& seal) {
  const std::string key = KeyLayout::entry(seal);
  const std::string where = uri() + ": " + key;
  const std::optional<std::string> text = b_->get(key, kMaxEntryBytes);
  if (!text) fail_field(uri(), key, "a stored state", "none (never stored, removed, or evicted)");
  const nlohmann::json j = kv::parse_json_strict(*text, where, 8, 2 * kMaxChunksPerPayload + 64);
  StrictObject top(j, "", where);
  Entry e;
  top.expect_string("format", kEntryFormat);
  if (top.integer("version", 0, 1000) != kEntryVersion)
    fail_field(where, "version", std::to_string(kEntryVersion), "another version");
  e.seal = top.string("seal", 64);
  e.ns = top.string("namespace", 32);
  e.stored_at = top.integer("stored_at", 0, int64_t(1) << 40);
  e.chunk_bytes = top.unsigned_integer("chunk_bytes", kMaxChunkBytes);
  {
    StrictObject ch = top.object("chunks");
    for (kv::Payload p : {kv::Payload::keys, kv::Payload::values}) {
      const char* f = p == kv::Payload::keys ? "keys" : "values";
      const nlohmann::json& arr = ch.array(f, kMaxChunksPerPayload);
      for (size_t i = 0; i < arr.size(); ++i) {
        if (!arr[i].is_string() || !is_hex(arr[i].get<std::string>(), 64))
          fail_field(where, ch.element(f, i), "a SHA-256 (64 hex digits)", json_type_name(arr[i]));
        e.chunks[int(p)].push_back(arr[i].get<std::string>());
      }
    }
    ch.done();
  }
  e.manifest_text = top.string("manifest", kv::kMaxManifestBytes);
  top.done();
  if (e.seal != seal) fail_field(where, "seal", seal + " (the key)", e.seal);
  if (e.chunk_bytes < kMinChunkBytes || e.chunk_bytes % 2 != 0)
    fail_field(where, "chunk_bytes", "an even size in [4096, 16 MiB]", std::to_string(e.chunk_bytes));
  // The manifest strictly, its seal recomputed (kv/seal.h): the record's other fields are
  // bound to it below, and the chunks to its payload hashes when they are read.
  const kv::StateHeader h = kv::parse_state_manifest(e.manifest_text, where + " manifest");
  kv::require_kind(h, kv::Accept::native, where + " manifest");
  e.manifest = h.manifest;
  if (e.manifest.seal != seal) fail_field(where, "manifest.seal", seal + " (the key)", e.manifest.seal);
  if (namespace_of(e.manifest) != e.ns)
    fail_field(where, "namespace", namespace_of(e.manifest) + " (of the manifest's model, tokenizer and numerics)",
               e.ns);
  const uint64_t want = chunk_count(e.manifest.payload_bytes(), e.chunk_bytes);
  for (kv::Payload p : {kv::Payload::keys, kv::Payload::values})
    if (e.chunks[int(p)].size() != want)
      fail_field(where, std::string("chunks.") + (p == kv::Payload::keys ? "keys" : "values"),
                 std::to_string(want) + " chunks of " + std::to_string(e.chunk_bytes) + " bytes",
                 std::to_string(e.chunks[int(p)].size()));
  return e;
}

namespace {

// One payload's chunks as a ByteSource, fetched one at a time with their size bound: memory
// grows only with chunks received, never with a size a record claims. The chunks are not
// hashed here: the payload's SHA-256 (read_payloads) covers them all, and only when it fails
// are they hashed one by one to name the bad one (bad_chunk below).
class ChunkSource final : public ByteSource {
 public:
  ChunkSource(Backend& b, const std::string& seal, const Entry& e, kv::Payload p)
      : b_(b), seal_(seal), e_(e), p_(p), bytes_(e.manifest.payload_bytes()) {}
  void read(void* dst, size_t n) override {
    auto* out = static_cast<uint8_t*>(dst);
    while (n > 0) {
      if (at_ == cur_.size()) next();
      const size_t take = std::min(n, cur_.size() - at_);
      std::memcpy(out, cur_.data() + at_, take);
      out += take;
      n -= take;
      at_ += take;
    }
  }

  // "chunk KEY (payload.keys chunk i of n)" for the i-th chunk (0-based).
  std::string what(size_t i) const {
    const std::vector<std::string>& shas = e_.chunks[int(p_)];
    return "chunk " + KeyLayout::chunk(seal_, shas[i]) + " (" + kv::payload_field(p_) + " chunk " +
           std::to_string(i + 1) + " of " + std::to_string(shas.size()) + ")";
  }
  // The i-th chunk, present and of its size (Error naming it otherwise).
  std::string fetch(size_t i) const {
    const uint64_t want = std::min<uint64_t>(e_.chunk_bytes, bytes_ - i * e_.chunk_bytes);
    const std::optional<std::string> v = b_.get(KeyLayout::chunk(seal_, e_.chunks[int(p_)][i]), size_t(want));
    if (!v) fail_field(b_.uri(), what(i), "present", "missing (evicted or deleted)");
    if (v->size() != want) fail_field(b_.uri(), what(i), std::to_string(want) + " bytes", std::to_string(v->size()) + " bytes");
    return *v;
  }

 private:
  void next() {
    if (i_ >= e_.chunks[int(p_)].size()) fail(b_.uri(), "read past the last chunk of " + std::string(kv::payload_field(p_)));
    cur_ = fetch(i_++);
    at_ = 0;
  }
  Backend& b_;
  const std::string& seal_;
  const Entry& e_;
  kv::Payload p_;
  uint64_t bytes_;
  std::string cur_;
  size_t i_ = 0, at_ = 0;
};

// After a payload's hash failed: the first chunk whose bytes are not its SHA-256 (the error
// names it), else nothing (the record's chunk list itself is not the sealed payload's).
void name_bad_chunk(const ChunkSource& src, const Entry& e, kv::Payload p, const std::string& uri) {
  const std::vector<std::string>& shas = e.chunks[int(p)];
  for (size_t i = 0; i < shas.size(); ++i) {
    const std::string got = sha256_hex(src.fetch(i));
    if (got != shas[i]) fail_field(uri, src.what(i) + ": sha256", shas[i], got + " (corrupt)");
  }
}

}  // namespace

kv::VerifiedState Store::get(const std::string& seal, bool count_hit, int capacity) {
  Entry e = read_entry(seal);
  ChunkSource keys(*b_, seal, e, kv::Payload::keys), values(*b_, seal, e, kv::Payload::values);
  kv::PayloadReadOptions ro;
  ro.capacity = capacity;
  ro.keys_where = ro.values_where = uri() + ": " + KeyLayout::entry(seal);
  ro.found_label = "(the chunks)";
  kv::StateHeader h{e.manifest, kv::NativeProvenance{}};
  std::string text = e.manifest_text;
  try {
    kv::VerifiedState s = kv::read_payloads(std::move(h), std::move(text), keys, values, ro);
    // Best effort: a read never fails for want of a counter.
    if (count_hit) b_->increment(KeyLayout::hits(seal));
    return s;
  } catch (const Error& err) {
    if (std::string(err.what()).find(".sha256: expected") == std::string::npos) throw;
    name_bad_chunk(keys, e, kv::Payload::keys, uri());
    name_bad_chunk(values, e, kv::Payload::values, uri());
    throw;
  }
}

std::optional<std::string> Store::prefix_lookup(const std::string& ns, const std::string& hash) {
  const std::optional<std::string> v = b_->get(KeyLayout::prefix(ns, hash), kMaxSmallValue);
  if (!v || !is_hex(*v, 64)) return std::nullopt;
  return v;
}

// ---- catalog, verify, rm, gc, stats ------------------------------------------------------------

Catalog Store::catalog() {
  Catalog c;
  for (const std::string& k : b_->scan("ember:v1:s:*:entry")) {
    const std::string seal = untag(component(k, 3));
    if (!is_hex(seal, 64)) continue;
    Catalog::Item& it = c.seals[seal];
    it.has_entry = true;
    try {
      it.entry = read_entry(seal);
    } catch (const Error& e) {
      it.entry_error = e.what();
    }
    it.hits = b_->counter(KeyLayout::hits(seal));
  }
  for (const std::string& k : b_->scan("ember:v1:s:*:chunk:*")) {
    const std::string seal = untag(component(k, 3));
    if (is_hex(seal, 64)) c.seals[seal].chunk_keys.push_back(k);
  }
  for (const std::string& k : b_->scan("ember:v1:s:*:pending")) {
    const std::string seal = untag(component(k, 3));
    if (!is_hex(seal, 64)) continue;
    Catalog::Item& it = c.seals[seal];
    it.has_pending = true;
    const std::optional<std::string> v = b_->get(k, kMaxSmallValue);
    if (v && !v->empty() && v->size() < 18 && v->find_first_not_of("0123456789") == std::string::npos)
      it.pending_since = std::stoll(*v);
  }
  auto pointers = [&](const char* pattern, std::map<std::string, std::string>& out) {
    for (const std::string& k : b_->scan(pattern)) {
      const std::optional<std::string> v = b_->get(k, kMaxSmallValue);
      out[k] = v && is_hex(*v, 64) ? *v : "";
    }
  };
  pointers("ember:v1:n:*:name:*", c.names);
  pointers("ember:v1:n:*:prefix:*", c.prefixes);
  return c;
}

VerifyResult Store::verify() {
  const Catalog c = catalog();
  VerifyResult r;
  for (const auto& [seal, it] : c.seals) {
    if (it.has_entry) {
      if (!it.entry) {
        r.findings.push_back({"entry", KeyLayout::entry(seal), it.entry_error});
        continue;
      }
      try {
        get(seal, /*count_hit=*/false);
        ++r.entries_ok;
      } catch (const Error& e) {
        r.findings.push_back({"entry", KeyLayout::entry(seal), e.what()});
      }
      // Chunks the record does not name (from an interrupted put of another layout).
      size_t named = it.entry->chunks[0].size() + it.entry->chunks[1].size();
      if (it.chunk_keys.size() > named)
        r.findings.push_back({"orphan-chunks", KeyLayout::entry(seal),
                              std::to_string(it.chunk_keys.size() - named) + " chunks not in the record"});
      if (it.has_pending) r.findings.push_back({"stale-pending", KeyLayout::pending(seal), "the entry is published"});
    } else if (!it.chunk_keys.empty() || it.has_pending) {
      r.findings.push_back({"orphan-chunks", "ember:v1:s:{" + seal + "}",
                            std::to_string(it.chunk_keys.size()) + " chunks without an entry" +
                                (it.pending_since ? " (put started at " + std::to_string(*it.pending_since) + ")"
                                                  : " (no live put)")});
    }
  }
  auto dangling = [&](const std::map<std::string, std::string>& m, const char* what) {
    for (const auto& [k, seal] : m) {
      auto it = c.seals.find(seal);
      if (seal.empty() || it == c.seals.end() || !it->second.has_entry)
        r.findings.push_back({what, k, seal.empty() ? "not a seal" : "points at state " + seal + ", not stored"});
    }
  };
  dangling(c.names, "dangling-name");
  dangling(c.prefixes, "dangling-prefix");
  return r;
}

void Store::remove_state(const std::string& seal, const Catalog& c, GcResult& r) {
  // Pointers first (no reader is sent to a state being removed), then the record (the state
  // is gone for every reader), then its chunks.
  for (const auto& [k, s] : c.names)
    if (s == seal) b_->remove(k), ++r.names_removed;
  for (const auto& [k, s] : c.prefixes)
    if (s == seal) b_->remove(k), ++r.prefixes_removed;
  auto it = c.seals.find(seal);
  if (it != c.seals.end() && it->second.has_entry) {
    b_->remove(KeyLayout::entry(seal));
    ++r.entries_removed;
  }
  if (it != c.seals.end())
    for (const std::string& k : it->second.chunk_keys) b_->remove(k), ++r.chunks_removed;
  b_->remove(KeyLayout::hits(seal));
  if (it != c.seals.end() && it->second.has_pending) b_->remove(KeyLayout::pending(seal)), ++r.pending_removed;
}

GcResult Store::remove(const std::string& ref) {
  const Catalog c = catalog();
  GcResult r;
  if (is_hex(ref, 64)) {
    auto it = c.seals.find(ref);
    if (it == c.seals.end() || !it->second.has_entry) fail_field(uri(), "state " + ref, "a stored state", "none");
    remove_state(ref, c, r);
    return r;
  }
  const std::string seal = resolve(ref);
  const size_t slash = ref.find('/');
  const std::string key = KeyLayout::name(ref.substr(0, slash), ref.substr(slash + 1));
  b_->remove(key);
  ++r.names_removed;
  bool other = false;
  for (const auto& [k, s] : c.names) other = other || (s == seal && k != key);
  if (!other) {
    Catalog rest = c;
    rest.names.erase(key);
    remove_state(seal, rest, r);
  }
  return r;
}

GcResult Store::gc(const GcOptions& o) {
  const Catalog c = catalog();
  const int64_t now = now_s(o.now);
  GcResult r;
  struct Live {
    int64_t at;
    std::string seal;
    uint64_t bytes;
  };
  std::vector<Live> live;
  for (const auto& [seal, it] : c.seals) {
    if (it.has_entry && !it.entry) {  // a record no reader accepts
      remove_state(seal, c, r);
      continue;
    }
    if (it.has_entry) {
      if (o.older_than_s >= 0 && it.entry->stored_at < now - o.older_than_s) {
        remove_state(seal, c, r);
        continue;
      }
      live.push_back({it.entry->stored_at, seal, 2 * it.entry->manifest.payload_bytes()});
      if (it.has_pending) b_->remove(KeyLayout::pending(seal)), ++r.pending_removed;
      continue;
    }
    // No record: chunks of a put that died, unless the put is younger than the grace period.
    const bool young = it.pending_since && *it.pending_since > now - o.grace_s;
    if (!young) remove_state(seal, c, r);
  }
  std::sort(live.begin(), live.end(), [](const Live& a, const Live& b) {
    return a.at != b.at ? a.at < b.at : a.seal < b.seal;
  });
  uint64_t total = 0;
  for (const Live& l : live) total += l.bytes;
  size_t i = 0;
  for (; i < live.size() && total > o.max_bytes; ++i) {
    remove_state(live[i].seal, c, r);
    total -= live[i].bytes;
  }
  r.entries_kept = live.size() - i;
  r.bytes_kept = total;
  // Pointers at states that are gone (or were never published).
  std::set<std::string> removed;
  for (size_t k = 0; k < i; ++k) removed.insert(live[k].seal);
  auto sweep = [&](const std::map<std::string, std::string>& m, size_t& count) {
    for (const auto& [k, seal] : m) {
      auto it = c.seals.find(seal);
      const bool stored = !seal.empty() && it != c.seals.end() && it->second.entry && !removed.count(seal) &&
                          !(o.older_than_s >= 0 && it->second.entry->stored_at < now - o.older_than_s);
      if (!stored && b_->exists(k)) b_->remove(k), ++count;
    }
  };
  sweep(c.names, r.names_removed);
  sweep(c.prefixes, r.prefixes_removed);
  return r;
}

StoreStats Store::stats() {
  const Catalog c = catalog();
  StoreStats s;
  for (const auto& [seal, it] : c.seals) {
    s.chunks += it.chunk_keys.size();
    if (it.entry) {
      ++s.entries;
      s.payload_bytes += 2 * it.entry->manifest.payload_bytes();
      s.hits += it.hits;
    } else if (it.has_entry) {
      ++s.invalid_entries;
    } else {
      ++s.orphan_groups;
    }
  }
  s.names = c.names.size();
  s.prefix_keys = c.prefixes.size();
  return s;
}

}  // namespace ember::store
