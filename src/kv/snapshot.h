#pragma once
// ember.kv-snapshot.v1: a frozen native KV state, as a directory of three fixed files.
//
//   DIR/manifest.json   canonical JSON (fixed key order, byte-identical for the same state)
//   DIR/keys.f16le      f16 bit patterns, little-endian, [layer][kv_head][position][dim]
//   DIR/values.f16le    same layout; active positions [0, P) only, no unused capacity
//
// The snapshot covers the P prefix tokens at absolute positions [0, P). The token chosen from
// the boundary logits (the logits after prefix token P-1) is stored as the *resume token* at
// absolute position P; it is NOT in the cache and the boundary logits are NOT stored. Replay
// evaluates the resume token first (appending its K/V at position P) and so obtains the
// logits for position P+1. Byte layout, the diagram and the reader's rejections:
// docs/formats/kv-snapshot-v1.md.
//
// Shared types: kv compare/perturb and the KVC1 container read and write these structs.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/kv_cache.h"

namespace ember::kv {

inline constexpr const char* kSnapshotFormat = "ember.kv-snapshot";
inline constexpr int kSnapshotVersion = 1;
// Fixed file names: never taken from input (no path traversal through a manifest).
inline constexpr const char* kManifestFile = "manifest.json";
inline constexpr const char* kKeysFile = "keys.f16le";
inline constexpr const char* kValuesFile = "values.f16le";

// Closed vocabularies of the semantic fields (the reader rejects anything else).
inline constexpr const char* kKeyStatePostRope = "post-rope";  // after bias, Q/K norm, RoPE
inline constexpr const char* kKeyStatePreRope = "pre-rope";    // reserved; never exported
inline constexpr const char* kValueStateProjected = "projected";  // V projection (+ bias)
inline constexpr const char* kQkNormNone = "none";
inline constexpr const char* kQkNormRmsPerHead = "rmsnorm-per-head-before-rope";  // qwen3

// Reader limits: a manifest cannot make ember allocate or loop on an absurd geometry.
inline constexpr int kMaxLayers = 1024;
inline constexpr int kMaxKvHeads = 1024;
inline constexpr int kMaxHeadDim = 4096;
inline constexpr int kMaxPositions = 1 << 22;
inline constexpr int kMaxVocab = 1 << 24;
inline constexpr size_t kMaxManifestBytes = size_t(64) << 20;
inline constexpr size_t kMaxManifestValues = size_t(kMaxPositions) + 256;  // JSON values

struct ModelInfo {
  std::string identity;      // hex SHA-256 model identity (docs/identity.md)
  std::string architecture;  // llama | qwen2 | qwen3
  int vocab_size = 0;
  int embedding_size = 0;  // n_embd
  int query_heads = 0;     // n_heads (GQA: a multiple of geometry.kv_heads)
};

struct TokenizerInfo {
  std::string identity;  // hex SHA-256 tokenizer identity
};

struct Geometry {
  int layers = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int positions = 0;  // P: the cache holds absolute positions [0, P)
};

struct RopeInfo {
  std::string layout;  // normal (adjacent pairs) | neox (rotate-half)
  float theta = 0;
  std::string scaling_type = "none";  // none | linear | llama3
  float scaling_factor = 1.0f;
  int original_context = 0;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
};

struct AttentionInfo {
  std::string qk_norm;  // kQkNormNone | kQkNormRmsPerHead
  bool qkv_bias = false;
};

struct Representation {
  std::string dtype = "f16";                   // the only v1 dtype
  std::string byte_order = "little-endian";    // the only v1 byte order
  std::string layout = "layer,kv_head,position,dim";
  std::string keys = kKeyStatePostRope;
  std::string values = kValueStateProjected;
};

struct NumericsInfo {
  std::string contract;            // e.g. "canonical-v1" (docs/numerics.md)
  std::string engine_fingerprint;  // Engine::fingerprint() of the exporting engine
};

struct PrefixInfo {
  std::vector<int32_t> tokens;  // the P prefix token ids (BOS included when it was added)
  std::string sha256;           // SHA-256 of the ids as int32 little-endian (prefix_hash())
};

struct ResumeInfo {
  int32_t token = -1;      // argmax of the boundary logits (ties: lowest id)
  int64_t position = -1;   // its absolute position: always P
  std::string selection = "greedy-argmax";
};

struct PayloadEntry {
  std::string file;  // kKeysFile / kValuesFile (fixed; checked, never used to open)
  uint64_t bytes = 0;
  std::string sha256;
};

struct SnapshotManifest {
  std::string format = kSnapshotFormat;
  int version = kSnapshotVersion;
  std::string producer;  // "ember <version>", informational
  ModelInfo model;
  TokenizerInfo tokenizer;
  Geometry geometry;
  RopeInfo rope;
  AttentionInfo attention;
  Representation representation;
  NumericsInfo numerics;
  PrefixInfo prefix;
  ResumeInfo resume;
  // Optional "past_context": true, written only when the prefix holds more positions than the
  // exporting model's context length (export with --allow-past-context). A record, not a
  // permission: replay compares positions with the target's context either way.
  bool past_context = false;
  PayloadEntry keys{kKeysFile, 0, {}};
  PayloadEntry values{kValuesFile, 0, {}};

  // Canonical JSON: fixed key order, 2-space indent, integer arrays on one line, a final
  // newline. The same manifest gives the same bytes every time.
  std::string to_json() const;
  // Strict parse: rejects malformed JSON, duplicated keys (at any depth), unknown or missing
  // keys, wrong types, out-of-range values and internal inconsistency (validate()). `where`
  // names the source in error messages (e.g. the manifest path).
  static SnapshotManifest from_json(const std::string& text, const std::string& where);
  // Internal consistency: limits, vocabularies, positions == prefix count == resume position,
  // ids < vocab_size, prefix hash, payload sizes implied by the geometry, fixed file names.
  // Throws Error naming `where` and the field.
  void validate(const std::string& where) const;

  // Bytes of one payload file implied by the geometry (2 * layers * kv_heads * P * head_dim).
  uint64_t payload_bytes() const;

  // The coordinates a target must match for a strict import, in check order, as
  // (field name, canonical value) pairs: model identity, architecture, tokenizer identity,
  // geometry (without positions), RoPE, Q/K norm, representation, numerics. kv compare uses
  // the same list to prove that two snapshots align.
  std::vector<std::pair<std::string, std::string>> target_fields() const;
};

// SHA-256 (hex) of token ids written as int32 little-endian.
std::string prefix_hash(const std::vector<int32_t>& tokens);

// A snapshot in memory: the manifest and a cache whose capacity is exactly P positions
// (cache.n_pos == cache.capacity == manifest.geometry.positions).
struct Snapshot {
  SnapshotManifest manifest;
  model::KvCache cache;
};

// Fills manifest.geometry.positions, prefix.sha256 and the payload entries (sizes, hashes)
// from the cache, which must match the manifest's layers/kv_heads/head_dim. A state is
// sealed once, by the code that produced it natively (export, or a reader of a verified
// file); write_snapshot() refuses a cache that no longer matches its seal.
void seal(Snapshot& s);

// Writes DIR atomically (temporary sibling, fsync, rename; see util/atomic_file.h). Refuses
// an existing DIR unless force. Recomputes the payload hashes while writing and refuses,
// leaving nothing behind, if they differ from the manifest's (a modified cache is not a
// native snapshot).
void write_snapshot(const Snapshot& s, const std::string& dir, bool force);

// Reads and verifies everything (manifest, consistency, sizes, SHA-256 of both payloads).
// Allocates only after the payload file sizes have been checked against the geometry.
Snapshot read_snapshot(const std::string& dir);
// Reads and validates only manifest.json (no payload access).
SnapshotManifest read_manifest(const std::string& dir);

struct VerifyCheck {
  std::string name;    // "manifest", "consistency", "files", "keys.sha256", ...
  std::string status;  // "ok" | "failed" | "skipped"
  std::string detail;  // the error line when failed
};
struct VerifyReport {
  std::string path;
  bool ok = false;
  std::vector<VerifyCheck> checks;
  SnapshotManifest manifest;  // meaningful when the manifest check passed
  bool manifest_ok = false;
  std::string error;  // the first failure, one line
  nlohmann::ordered_json to_json() const;
};
// Checks format, sizes, hashes and internal consistency without a model, streaming the
// payloads (no allocation of their size). Never throws for a bad snapshot: the report says.
VerifyReport verify_snapshot(const std::string& dir);

}  // namespace ember::kv
