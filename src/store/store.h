#pragma once
// ember's shared KV store: sealed snapshots (ember.kv-snapshot.v1) as content-addressed chunks
// on a key-value backend (store/backend.h: dir:PATH, redis://, redis+cluster://), published
// so that a reader never sees part of one, and read back only after every byte is verified.
// Key layout (store/key_layout.h), the chained prefix hash, what get checks, and the put/gc
// protocol: docs/store.md.
//
// SEAL is the snapshot's seal (kv/seal.h), so one snapshot's keys share one hash tag (one
// Redis Cluster node) and a second writer of the same state writes the same keys. NS is the
// namespace of (model identity, tokenizer identity, numerics contract, engine fingerprint):
// a lookup made for another model or engine can never reach a state of this one (a name or
// prefix key of NS that holds another namespace's seal is refused, and verify reports it).
//
// The entry record is canonical JSON: {"format": "ember.store-entry", "version": 1, "seal",
// "namespace", "stored_at" (unix seconds), "chunk_bytes", "chunks": {"keys": [SHA256...],
// "values": [...]}, "manifest": the manifest.json text}.
//
// Thread-safety: a Store (one backend connection) is used by one thread at a time; any number
// of Stores, in any number of processes, may work on one backend at once.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kv/state.h"
#include "store/backend.h"
#include "store/key_layout.h"

namespace ember::store {

inline constexpr const char* kEntryFormat = "ember.store-entry";
inline constexpr int kEntryVersion = 1;
inline constexpr size_t kDefaultChunkBytes = size_t(1) << 20;
inline constexpr size_t kMinChunkBytes = 4096;
inline constexpr size_t kMaxChunkBytes = size_t(16) << 20;
inline constexpr size_t kMaxChunksPerPayload = size_t(1) << 20;
inline constexpr int kPrefixBlock = 16;  // tokens per block of the chained prefix hash

// The namespace of a manifest: the first 32 hex digits of SHA-256 over the length-prefixed
// fields "ember.store-namespace.v1", model.identity, tokenizer.identity, numerics.contract,
// numerics.engine_fingerprint (Sha256::update_field).
std::string namespace_of(const kv::SnapshotManifest& m);

// The chained hash of the full 16-token blocks of `tokens` (docs/store.md):
//   h_0 = SHA-256(field("ember.prefix-chain.v1") || field(ns))
//   h_b = SHA-256(h_{b-1} (32 bytes) || the 16 ids of block b as int32 little-endian)
// Returns hex h_1 .. h_B, B = tokens.size() / 16. Deterministic across processes and hosts.
std::vector<std::string> prefix_chain(const std::string& ns, std::span<const int32_t> tokens);

// An entry record as read (strictly: unknown, missing, mistyped fields refused) and checked
// against its manifest: seal, namespace, chunk count.
struct Entry {
  std::string seal, ns;
  int64_t stored_at = 0;
  uint64_t chunk_bytes = 0;
  std::vector<std::string> chunks[2];  // [kv::Payload]
  std::string manifest_text;
  kv::SnapshotManifest manifest;
};

struct PutOptions {
  std::string name;  // optional; [A-Za-z0-9._-]{1,128}
  bool force = false;  // let the name point at this state when it points at another
  size_t chunk_bytes = kDefaultChunkBytes;
};

struct PutResult {
  std::string ns, seal;
  bool stored = false;       // this call published the entry (false: it was there: a no-op)
  size_t chunks = 0;         // chunks of the state
  size_t chunks_written = 0;
  size_t prefix_keys = 0;    // prefix-index keys this call created
};

// One pass over every key of the store, grouped (what ls, verify, gc and stats read).
struct Catalog {
  struct Item {
    std::optional<Entry> entry;  // when the record is present and valid
    std::string entry_error;     // when the record is present and invalid
    bool has_entry = false;
    std::vector<std::string> chunk_keys;
    std::optional<int64_t> pending_since;  // the pending marker's start time
    bool has_pending = false;
    std::optional<int64_t> hits;  // nullopt: the counter could not be read (hits_error says why)
    std::string hits_error;
    std::vector<std::string> signature_keys;
  };
  std::map<std::string, Item> seals;                    // by seal
  std::map<std::string, std::string> names, prefixes;   // key -> seal it names ("" if malformed)
};

struct VerifyFinding {
  // "entry", "orphan-chunks", "dangling-name", "dangling-prefix", "stale-pending",
  // "misplaced-name" / "misplaced-prefix" (a pointer at a state of another namespace or, for a
  // prefix, another prompt), "bad-signature", "stale-temporary" (a dead dir: put's file)
  std::string what;
  std::string key;
  std::string detail;
};
struct VerifyResult {
  size_t entries_ok = 0;
  std::vector<VerifyFinding> findings;
  bool ok() const { return findings.empty(); }
};

struct GcOptions {
  int64_t older_than_s = -1;         // remove entries stored longer ago than this (-1: none)
  uint64_t max_bytes = UINT64_MAX;   // then remove the oldest until payload bytes <= this
  int64_t grace_s = 900;             // a put (or a dir: temporary) younger than this is live: kept
  int64_t now = 0;                   // 0: the clock
};
struct GcResult {
  size_t entries_removed = 0, chunks_removed = 0, names_removed = 0, prefixes_removed = 0, pending_removed = 0;
  size_t temporaries_removed = 0;
  size_t entries_kept = 0;
  uint64_t bytes_kept = 0;
};

struct StoreStats {
  size_t entries = 0, invalid_entries = 0, chunks = 0, names = 0, prefix_keys = 0, orphan_groups = 0;
  uint64_t payload_bytes = 0;  // keys + values of the valid entries
  int64_t hits = 0;
};

class Store {
 public:
  explicit Store(std::unique_ptr<Backend> backend) : b_(std::move(backend)) {}
  static Store open(const std::string& uri, const BackendOptions& options = {}) {
    return Store(open_backend(uri, options));
  }
  Backend& backend() { return *b_; }
  const std::string& uri() const { return b_->uri(); }

  // Stores a sealed native snapshot: checks the cache against its seal, writes the pending
  // marker, every chunk, then the entry (create-only), removes the marker, puts back any chunk
  // a concurrent gc removed before the entry existed, then the name, the prefix-index keys and
  // the signature record. A state already stored is a no-op (missing or corrupt chunks are
  // rewritten; a valid signature is added). A name that points at another state is an Error
  // unless force. The state is verified: its payload is not hashed again here (only cut into
  // chunks, each named by its SHA-256).
  PutResult put(const kv::VerifiedState& s, const PutOptions& options);

  // "NS/NAME" or a seal (64 hex digits) -> the seal. Error naming the ref when absent.
  std::string resolve(const std::string& ref);

  // The entry record of `seal`, strictly read and checked. Error naming the key. With
  // expect_ns, the state must be of that namespace (a name's or a prefix key's own).
  Entry read_entry(const std::string& seal, const std::string& expect_ns = {});

  // The state of `seal`: the entry (read_entry), then every chunk of each payload fetched with
  // its size bound and read once, straight into the cache (kv::read_payloads): each payload's
  // SHA-256 and finiteness against the sealed manifest (a missing chunk is an Error naming its
  // key; when a payload's hash fails, the chunks are hashed to name the corrupt one). Nothing is
  // returned before every check passed. The cache holds max(P, capacity) positions: room for
  // decoding, so a prefix hit needs no copy. count_hit increments :hits, best effort: a counter
  // that cannot be written (a read-only ACL, a FIFO planted at the key) is a warning
  // (take_warnings), never a failed read.
  kv::VerifiedState get(const std::string& seal, bool count_hit = true, const std::string& expect_ns = {},
                        int capacity = 0);
  // get() of "NS/NAME" (the state must be of NS) or of a seal.
  kv::VerifiedState get_ref(const std::string& ref, int capacity = 0);

  // The signature of `seal` by `public_key` (64 hex digits) a put recorded, when there is one
  // and it verifies; nullopt otherwise. (The entry's manifest keeps its first writer's.)
  std::optional<Ed25519Signature> signature(const std::string& seal, const std::string& public_key);

  // The seal the prefix index holds for a chained hash, when that state is of namespace `ns`
  // and its prompt has that hash (nullopt otherwise: a key at another prompt's or model's state
  // is ignored, not followed; verify reports it, gc removes it). An entry that cannot be read
  // is returned as is, for get to name what is wrong with it.
  std::optional<std::string> prefix_lookup(const std::string& ns, const std::string& hash);

  // Warnings since the last call (hit counts not written), one line each.
  std::vector<std::string> take_warnings() { return std::move(warnings_); }

  Catalog catalog();
  VerifyResult verify();
  // Removes "NS/NAME" (and its state when no other name points at it) or a seal (the state
  // and every name and prefix key pointing at it). Returns what was removed.
  GcResult remove(const std::string& ref);
  GcResult gc(const GcOptions& options);
  StoreStats stats();

 private:
  void remove_state(const std::string& seal, const Catalog& cat, GcResult& r);
  std::unique_ptr<Backend> b_;
  std::vector<std::string> warnings_;
};

// [A-Za-z0-9._-]{1,128}: the names a store accepts.
bool valid_name(const std::string& name);

}  // namespace ember::store
