#pragma once
// The KV state as one value: what ember reads, verifies once, uses, seals and writes, whatever
// computed it and whatever container carried it (docs/architecture.md, "The one state value").
//
//   KvState       { manifest, provenance, cache }: plain data, free to change
//   VerifiedState a KvState whose payload bytes are known to be the ones its manifest seals
//                 (and finite, unless a reader was asked to allow otherwise). Only the readers
//                 (read_payloads, through the directory, KVC1 and store readers) and seal() make
//                 one; everything that consumes a state (import, replay, compare, store put,
//                 the writers) takes it and never hashes the payload again. Changing a state
//                 (perturb, map) starts from release() and must seal() again.
//
// Provenance says who computed the K/V and how they relate to the manifest's model:
//   NativeProvenance   ember's engine, under the manifest's numerics contract (ember.kv-snapshot)
//   MappedProvenance   a translator authored it for the target model (ember.kv-mapped)
//   ForeignProvenance  another engine computed it (ember.kv-foreign: llama.cpp, mlx, vLLM, torch)
// The manifest fields are the same for all three (kv/snapshot.h); the provenance object is the
// one part that differs, so no function takes a kind as a pair of nullable pointers.
#include <cstdint>
#include <string>
#include <variant>

#include "kv/snapshot.h"
#include "util/byte_io.h"

namespace ember::kv {

struct NativeProvenance {};
using Provenance = std::variant<NativeProvenance, MappedProvenance, ForeignProvenance>;
enum class StateKind { native, mapped, foreign };

// What a manifest.json holds, for any kind. `manifest.format` is kSnapshotFormat in memory for
// all (the kind is the provenance's), so every native rule and target_fields() apply unchanged
// to a mapped or foreign cache.
struct StateHeader {
  SnapshotManifest manifest;
  Provenance provenance;

  StateKind kind() const { return StateKind(provenance.index()); }
  const char* format() const;  // kSnapshotFormat | kMappedFormat | kForeignFormat
  bool mapped() const { return kind() == StateKind::mapped; }
  bool is_foreign() const { return kind() == StateKind::foreign; }
  const MappedProvenance* mapping() const { return std::get_if<MappedProvenance>(&provenance); }
  const ForeignProvenance* foreign() const { return std::get_if<ForeignProvenance>(&provenance); }
};

// A state in memory: its manifest, provenance and a cache of exactly its P positions at the
// front (cache.n_pos == manifest.geometry.positions; capacity may be larger, for a reader
// that was asked to leave room for decoding).
struct KvState : StateHeader {
  model::KvCache cache;
};

class VerifiedState {
 public:
  const KvState& state() const { return s_; }
  const SnapshotManifest& manifest() const { return s_.manifest; }
  const Provenance& provenance() const { return s_.provenance; }
  const StateHeader& header() const { return s_; }
  const model::KvCache& cache() const { return s_.cache; }
  StateKind kind() const { return s_.kind(); }
  // The canonical manifest.json of this state (state_manifest_json), as written or read.
  const std::string& manifest_text() const { return text_; }
  // False for a state holding NaN or Inf (read with allow_non_finite, kv compare's opt-in for
  // broken caches, or sealed over such values): imports refuse it, and the writers refuse it
  // naming the first bad value's coordinates.
  bool finite() const { return finite_; }
  // Gives the state up for changing (or moving its cache into an engine): it is no longer
  // verified, and must be sealed again before anything writes or imports it.
  KvState release() && { return std::move(s_); }
  // An explicit copy (the cache is copied: the cost is visible at the call site).
  VerifiedState copy() const {
    KvState c;
    static_cast<StateHeader&>(c) = s_;
    c.cache = s_.cache.copy();
    return VerifiedState(std::move(c), text_, finite_);
  }

 private:
  friend class StateVerifier;
  VerifiedState(KvState s, std::string text, bool finite)
      : s_(std::move(s)), text_(std::move(text)), finite_(finite) {}
  KvState s_;
  std::string text_;
  bool finite_ = true;
};

// The strict parse of any kind: every SnapshotManifest rule, plus the provenance object of a
// mapped ("mapping") or foreign ("foreign") manifest read as strictly (unknown, missing,
// duplicated and mistyped keys refused) and validated; the seal recomputed and any signature
// verified. A native manifest with a "mapping" key, or a mapped one without it, is refused.
StateHeader parse_state_manifest(const std::string& text, const std::string& where);

// Which kinds an entry point accepts. The reader parses every manifest fully first, then
// refuses the other kind by name: a native-only entry point never loads a mapped cache as
// native, and a mapped-only one never takes a native snapshot for a mapping's output.
// A foreign cache is accepted only where Accept::foreign or Accept::any is asked.
enum class Accept { native, mapped, foreign, any };
void require_kind(const StateHeader& s, Accept accept, const std::string& where);
bool accepts(Accept accept, StateKind kind);

// The canonical manifest text of a state: SnapshotManifest::to_json() for a native one
// (byte-identical), the same document with the kind's "format" and its provenance object
// appended otherwise. Validates first (Error naming `where`).
std::string state_manifest_json(const StateHeader& h, const std::string& where);
// The seal (kv/seal.h) over the canonical document without seal and signature: it covers
// every field, the provenance and the payload hashes.
std::string state_seal(const StateHeader& h);
// Signs the seal with the Ed25519 private key in `private_key_pem` (the manifest must be
// complete: sealed over its cache, provenance final).
void sign_manifest(StateHeader& h, const std::string& private_key_pem);

// ---- Making a verified state -------------------------------------------------------------------
// Seals a state its producer computed (export, a mapper, an importer of another engine's cache):
// fills geometry.positions, prefix.sha256 and the payload entries from the cache (one hash
// pass), validates the manifest and its provenance, and computes the seal. With sign_key_pem,
// signs it too. The cache's layers/kv_heads/head_dim must be the manifest's.
VerifiedState seal(KvState s, const std::string& where, const std::string& sign_key_pem = "");
// The same state signed with another key (kvc pack --sign): the payload is not hashed again.
VerifiedState resign(VerifiedState s, const std::string& sign_key_pem);
// The same state carrying `signature` (another signer's signature of its seal, as a store keeps
// them): Error naming the field unless it verifies against the seal. No payload hash.
VerifiedState with_signature(VerifiedState s, const Ed25519Signature& signature);

struct PayloadReadOptions {
  bool allow_non_finite = false;  // only for analysing broken caches (kv compare opt-in)
  int capacity = 0;               // the cache holds max(P, capacity) positions: room to decode
  // Names in errors: the source of each payload (a file, a container's tensors, a store's chunks)
  // and what the found bytes are called ("payload bytes", "the chunks", ...).
  std::string keys_where, values_where, found_label = "(payload bytes)";
  std::string keys_field = "payload.keys", values_field = "payload.values";  // the fields errors name
};

// The one payload reader. `header` is a parsed manifest (parse_state_manifest) whose text is
// `manifest_text`; `keys` and `values` yield its two payloads ([layer][kv_head][position][dim]
// f16 little-endian, payload_bytes() each), read once, layer by layer (K of layer l, then V of
// layer l: a KVC1 file is read in file order), straight into the cache rows, through
// PayloadCheck: each payload's SHA-256 against the manifest, then finiteness unless allowed.
// Every state ember reads passes here exactly once.
VerifiedState read_payloads(StateHeader header, std::string manifest_text, ByteSource& keys, ByteSource& values,
                            const PayloadReadOptions& options);

// ---- The snapshot directory (both kinds' one reader and writer) ----------------------------
struct ReadOptions {
  Accept accept = Accept::native;
  bool allow_non_finite = false;  // only for analysing broken caches (kv compare opt-in)
  int capacity = 0;               // see PayloadReadOptions
};

// A directory's header as read: the manifest (and provenance) and its exact bytes.
struct StateDirHeader {
  StateHeader header;
  std::string manifest_text;
};

// The one reader. In order: DIR is a directory holding exactly manifest.json, keys.f16le and
// values.f16le (a stray entry is refused by name); each is opened without following links
// and must be a regular file (a symlink, FIFO, device or directory is refused without
// blocking); the manifest is parsed strictly (parse_state_manifest) and its kind checked
// (require_kind); both payload sizes are checked against the geometry before anything of
// their size is allocated; then read_payloads. Error naming the file and field.
VerifiedState read_state_dir(const std::string& dir, const ReadOptions& options = {});
// Only the entries and the manifest (no payload access): what read_state_dir checks first.
StateDirHeader read_state_header(const std::string& dir, Accept accept);

// The one writer: DIR atomically (temporary sibling, fsync, rename; util/atomic_file.h),
// refusing an existing DIR unless force. Each payload is written through PayloadCheck, and the
// write is abandoned, leaving nothing, if its hash differs from the seal (hashes are computed
// over exactly the bytes written). manifest.json (canonical) is written last.
void write_state_dir(const VerifiedState& s, const std::string& dir, bool force);

// A snapshot directory or a KVC1 file, verified (every check of its reader), of a kind `accept`
// takes. `kv replay`, `kv compare`, the mapper and every command that reads a state call this
// (a store reference goes through store::open_state, one layer up).
VerifiedState open_state(const std::string& path, const ReadOptions& options = {});
// What open_state would dispatch to: "snapshot-dir", "kvc1" or "" (neither).
std::string state_kind(const std::string& path);

// What a script needs to name a state it wrote or verified: positions, resume, model identity,
// prefix and payload hashes, the seal and the signer (`kv export --json`, `kv verify --json`).
nlohmann::ordered_json state_summary_json(const SnapshotManifest& m);

struct VerifyCheck {
  std::string name;    // "directory", "manifest", "payload.keys.bytes", ".sha256", ".finite"
  std::string status;  // "ok" | "failed" | "skipped"
  std::string detail;  // the error line when failed
};
struct VerifyReport {
  std::string path;
  bool ok = false;
  std::vector<VerifyCheck> checks;
  SnapshotManifest manifest;  // meaningful when the manifest check passed
  bool manifest_ok = false;
  std::optional<ForeignProvenance> foreign;  // a foreign cache, verified with allow_foreign
  std::string error;  // the first failure, one line
  nlohmann::ordered_json to_json() const;
};
// The checks of read_state_dir, one by one, streaming the payloads (no allocation of their
// size). Never throws for a bad snapshot: the report says. allow_foreign: a foreign cache
// (ember.kv-foreign) is verified too (format, sizes, hashes, finiteness, seal: its integrity,
// not its numerics) instead of being refused by kind.
VerifyReport verify_snapshot(const std::string& dir, Accept accept = Accept::native, bool allow_foreign = false);

// Makes VerifiedState values: only the readers and seal() above use it.
class StateVerifier {
  friend VerifiedState seal(KvState, const std::string&, const std::string&);
  friend VerifiedState resign(VerifiedState, const std::string&);
  friend VerifiedState with_signature(VerifiedState, const Ed25519Signature&);
  friend VerifiedState read_payloads(StateHeader, std::string, ByteSource&, ByteSource&,
                                     const PayloadReadOptions&);
  static VerifiedState make(KvState s, std::string text, bool finite) {
    return VerifiedState(std::move(s), std::move(text), finite);
  }
};

}  // namespace ember::kv
