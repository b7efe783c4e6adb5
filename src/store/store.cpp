// The store's put (chunks, then the entry, create-only, then the chunks re-checked), its get
// (every chunk and the seal verified before anything is returned) and its lookups. ls, verify,
// rm, gc and stats over one catalog are catalog.cpp.
#include "store/store.h"

#include <algorithm>
#include <cstring>
#include <ctime>
#include <set>

#include "kv/seal.h"
#include "kv/strict_json.h"
#include "util/byte_io.h"
#include "util/error.h"
#include "util/hex.h"
#include "util/sha256.h"

namespace ember::store {
namespace {

constexpr size_t kMaxEntryBytes = size_t(256) << 20;  // manifest (<= 64 MiB, escaped) + chunk lists
constexpr size_t kMaxSmallValue = 128;                // a seal, a pending time

int64_t now_s(int64_t now) { return now != 0 ? now : int64_t(std::time(nullptr)); }

// Cuts a payload stream into chunks and stores each under its SHA-256.
//   all        every chunk is written (a new state; a corrupted copy of a content-addressed
//              chunk is repaired by the next put of the same state)
//   differing  a chunk already holding exactly these bytes is left alone (the entry exists)
//   missing    only chunks absent now are written, under the SHA-256s `expected` names (after
//              publishing: a gc that ran while no entry existed may have removed some)
class ChunkSink final : public ByteSink {
 public:
  enum class Mode { all, differing, missing };
  ChunkSink(Backend& b, std::string seal, size_t chunk_bytes, Mode mode,
            const std::vector<std::string>* expected = nullptr)
      : b_(b), seal_(std::move(seal)), chunk_bytes_(chunk_bytes), mode_(mode), expected_(expected) {
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
    std::string sha;
    bool write = true;
    if (mode_ == Mode::missing) {
      EMBER_CHECK(expected_ && shas.size() < expected_->size());
      sha = (*expected_)[shas.size()];
      write = !b_.exists(KeyLayout::chunk(seal_, sha));
    } else {
      sha = sha256_hex(buf_);
      if (mode_ == Mode::differing) {
        const std::optional<std::string> cur = b_.get(KeyLayout::chunk(seal_, sha), buf_.size());
        write = !cur || *cur != buf_;
      }
    }
    if (write) {
      b_.replace(KeyLayout::chunk(seal_, sha), buf_);
      ++written;
    }
    shas.push_back(sha);
    buf_.clear();
  }
  Backend& b_;
  std::string seal_;
  size_t chunk_bytes_;
  Mode mode_;
  const std::vector<std::string>* expected_;
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

  // The chunks against a concurrent gc (docs/store.md, "put and gc"): gc deletes a state's
  // chunks only while its entry does not exist, atomically with that check
  // (Backend::remove_unless_exists). So once the entry exists, nothing of it goes unless the
  // state itself is removed; and whatever went before is put back by the pass after
  // publishing. A state removed while this put ran (gc --older-than, rm) is published again.
  for (int attempt = 0;; ++attempt) {
    if (attempt == 3)
      fail_field(uri() + ": " + KeyLayout::entry(r.seal), "entry", "to stay published while this put runs",
                 "removed 3 times (a concurrent gc or rm)");
    Entry e;
    e.seal = r.seal;
    e.ns = r.ns;
    e.stored_at = now_s(0);
    e.chunk_bytes = o.chunk_bytes;
    e.manifest_text = text;
    r.chunks = r.chunks_written = 0;
    if (b_->exists(KeyLayout::entry(r.seal))) {
      // The same state again: a no-op, except that chunks lost (evicted) or corrupted since
      // are rewritten, with the layout the stored record names.
      const Entry old = read_entry(r.seal);
      for (kv::Payload p : {kv::Payload::keys, kv::Payload::values}) {
        ChunkSink sink(*b_, r.seal, size_t(old.chunk_bytes), ChunkSink::Mode::differing);
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
        ChunkSink sink(*b_, r.seal, o.chunk_bytes, ChunkSink::Mode::all);
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
      const Entry pub = r.stored ? e : read_entry(r.seal);  // the other writer's must be valid too
      for (kv::Payload p : {kv::Payload::keys, kv::Payload::values}) {
        ChunkSink sink(*b_, r.seal, size_t(pub.chunk_bytes), ChunkSink::Mode::missing, &pub.chunks[int(p)]);
        kv::write_payload(s.cache, p, sink);
        sink.finish();
        r.chunks_written += sink.written;
      }
    }
    if (b_->exists(KeyLayout::entry(r.seal))) break;
    r.stored = false;
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
  // A signature is a statement about the seal, not part of it: every signer's valid signature
  // is kept under its own key (no first writer can squat a state), replacing only that
  // signer's earlier one. get --trust KEY reads the one by KEY.
  if (m.signature) {
    if (!ed25519_verify(*m.signature, kv::seal_signing_message(r.seal)))
      fail_field(where, "signature", "a valid Ed25519 signature of the seal", "an invalid signature");
    b_->replace(KeyLayout::signature(r.seal, m.signature->public_key),
                canonical_json(nlohmann::json(kv::signature_to_json(*m.signature))));
  }
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
    fail_field(uri(), "reference", "NAMESPACE/NAME (as ls prints), a seal (64 hex digits), or NAME with --model", "'" + ref + "'");
  const std::string key = KeyLayout::name(ref.substr(0, slash), ref.substr(slash + 1));
  const std::optional<std::string> v = b_->get(key, kMaxSmallValue);
  if (!v) fail_field(uri(), "name " + ref, "a stored name", "none");
  if (!is_hex(*v, 64)) fail_field(uri(), key, "a seal (64 hex digits)", "'" + *v + "'");
  return *v;
}

Entry Store::read_entry(const std::string& seal, const std::string& expect_ns) {
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
  // A name or prefix key lives in its namespace; a state of another namespace under it is
  // another model's, tokenizer's or engine's, never to be returned for this one.
  if (!expect_ns.empty() && e.ns != expect_ns)
    fail_field(where, "namespace",
               expect_ns + " (the namespace of the name or prefix key that led here)",
               e.ns + " (model " + e.manifest.model.identity + ", tokenizer " + e.manifest.tokenizer.identity +
                   ", engine " + e.manifest.numerics.engine_fingerprint + ")");
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

kv::VerifiedState Store::get(const std::string& seal, bool count_hit, const std::string& expect_ns, int capacity) {
  Entry e = read_entry(seal, expect_ns);
  ChunkSource keys(*b_, seal, e, kv::Payload::keys), values(*b_, seal, e, kv::Payload::values);
  kv::PayloadReadOptions ro;
  ro.capacity = capacity;
  ro.keys_where = ro.values_where = uri() + ": " + KeyLayout::entry(seal);
  ro.found_label = "(the chunks)";
  kv::StateHeader h{e.manifest, kv::NativeProvenance{}};
  std::string text = e.manifest_text;
  try {
    kv::VerifiedState s = kv::read_payloads(std::move(h), std::move(text), keys, values, ro);
    // Hit counting is bookkeeping, never on the read's critical path.
    if (count_hit) {
      try {
        b_->increment(KeyLayout::hits(seal));
      } catch (const Error& err) {
        warnings_.push_back(std::string("hit not counted: ") + err.what());
      }
    }
    return s;
  } catch (const Error& err) {
    // A version 2 payload names its bad block (layer, positions: "proof.blocks[i]: ..."), a
    // version 1 payload only its hash; either way the chunk holding the bad bytes is named too.
    const std::string what = err.what();
    const size_t block = what.find("proof.blocks[");
    if (block == std::string::npos && what.find(".sha256: expected") == std::string::npos) throw;
    try {
      name_bad_chunk(keys, e, kv::Payload::keys, uri());
      name_bad_chunk(values, e, kv::Payload::values, uri());
    } catch (const Error& chunk) {
      if (block == std::string::npos) throw;
      throw Error(std::string(chunk.what()) + "; " + what.substr(block));
    }
    throw;
  }
}

kv::VerifiedState Store::get_ref(const std::string& ref, int capacity) {
  const std::string seal = resolve(ref);
  return get(seal, true, is_hex(ref, 64) ? std::string() : ref.substr(0, ref.find('/')), capacity);
}

std::optional<Ed25519Signature> Store::signature(const std::string& seal, const std::string& public_key) {
  if (!is_hex(public_key, 64)) return std::nullopt;
  const std::string key = KeyLayout::signature(seal, public_key);
  const std::optional<std::string> v = b_->get(key, 4096);
  if (!v) return std::nullopt;
  const Ed25519Signature sig =
      kv::signature_from_json(kv::parse_json_strict(*v, uri() + ": " + key, 4, 16), uri() + ": " + key);
  if (sig.public_key != public_key || !ed25519_verify(sig, kv::seal_signing_message(seal))) return std::nullopt;
  return sig;
}

std::optional<std::string> Store::prefix_lookup(const std::string& ns, const std::string& hash) {
  const std::optional<std::string> v = b_->get(KeyLayout::prefix(ns, hash), kMaxSmallValue);
  if (!v || !is_hex(*v, 64)) return std::nullopt;
  Entry e;
  try {
    e = read_entry(*v);
  } catch (const Error&) {
    return v;  // missing or invalid: get names it (a miss, or the failure --on-bad-state reports)
  }
  if (e.ns != ns) return std::nullopt;
  const std::vector<std::string> chain = prefix_chain(ns, e.manifest.prefix.tokens);
  if (std::find(chain.begin(), chain.end(), hash) == chain.end()) return std::nullopt;
  return v;
}

}  // namespace ember::store
