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
// This header holds the format's fields, for every kind a snapshot directory holds (native;
// mapped and foreign: the same files plus a provenance object), and its byte-level pieces:
//   - SnapshotManifest, MappedProvenance, ForeignProvenance: the manifest.json fields (each
//     with one field list, kv/manifest_fields.h, that drives its writer, reader and rules);
//   - write_payload: the one payload serializer (files, hashers, KVC1 tensors, store chunks);
//   - PayloadCheck: what is checked on every payload stream (SHA-256, finiteness).
// The state built from them, its one reader and its writers are kv/state.h's.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/kv_cache.h"
#include "util/ed25519.h"
#include "util/byte_io.h"
#include "util/sha256.h"

namespace ember::kv {

inline constexpr const char* kSnapshotFormat = "ember.kv-snapshot";
// Version 2 adds the "proof" object (a hash per (layer, block of 16 positions) and the
// boundary logits' hash) and hashes each payload as the digest of its block digests. Version 1
// manifests are still read (no proof; payload hashes over the whole files). Version 3 adds the
// proof's optional witness (kv/witness.h); version 2 manifests are read as they are. Every writer
// writes version 3. docs/formats/kv-snapshot-v1.md, "Versions".
inline constexpr int kSnapshotVersion = 3;
inline constexpr int kOldestSnapshotVersion = 1;
inline constexpr int kProofBlockPositions = 16;  // positions per proof block (the last may hold fewer)
inline constexpr int kMaxWitnessLength = 256;    // proof.witness_length: at most this many tokens
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
// proof.blocks entries (layers * ceil(positions / 16)): a state past it cannot be sealed.
inline constexpr size_t kMaxProofBlocks = size_t(1) << 20;
inline constexpr size_t kMaxManifestValues = size_t(kMaxPositions) + kMaxProofBlocks + 256;  // JSON values

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

// What lets a reader check a state beyond its bytes (version 2): which block is bad, and whether
// re-decoding a position from the stored prefix gives the logits the producer saw.
struct ProofInfo {
  int block_positions = kProofBlockPositions;
  // Hex SHA-256 of the f32 little-endian logits after the last prefix position, as the
  // producer's prefill computed them (kv export, the store's saves). "" (the key absent) for a
  // state no ember prefill produced: mapped and foreign caches.
  std::string boundary_logits_sha256;
  // One per (layer, block b of positions [16b, min(16b + 16, P))), layer-major: hex
  // SHA-256(kd || vd), kd (vd) the 32-byte SHA-256 of the block's K (V) rows, kv_heads in order,
  // each head's positions in order (the bytes keys.f16le holds there). Filled by seal() and
  // checked by every reader in the pass that hashes the payload (PayloadCheck).
  std::vector<std::string> blocks;
  // Version 3, optional (kv/witness.h): the W tokens of a greedy continuation from the resume
  // token (witness_tokens[0] == resume.token), the hex SHA-256 of the last one's logits (f32
  // LE) and, per layer, of their attention (raw scores and output, docs/formats/kv-snapshot-v1.md).
  // Empty (the keys absent) when no ember prefill produced the state, or the producer recorded
  // none (kv export --witness 0).
  std::vector<int32_t> witness_tokens;
  std::string witness_logits_sha256;
  std::vector<std::string> witness_attention_sha256;
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
  ProofInfo proof;  // version 2 only (empty in a version 1 manifest)
  // The content identity (kv/seal.h): filled by the parser (checked against the document) and
  // by the writer; never an input of the seal itself. Printed by export, pinned by --expect.
  std::string seal;
  // Optional Ed25519 signature over the seal (sign_manifest); checked whenever present.
  std::optional<Ed25519Signature> signature;

  // Canonical JSON: fixed key order, 2-space indent, integer arrays on one line, a final
  // newline, ending with "seal" (and "signature" when signed). The same manifest gives the
  // same bytes every time.
  std::string to_json() const;
  // The document without "seal" and "signature" (state_manifest_json extends it for a mapped
  // cache); the seal is computed over it.
  nlohmann::ordered_json to_object() const;
  // Strict parse: rejects malformed JSON, duplicated keys (at any depth), unknown or missing
  // keys, wrong types, out-of-range values and internal inconsistency (validate()). `where`
  // names the source in error messages (e.g. the manifest path).
  static SnapshotManifest from_json(const std::string& text, const std::string& where);
  // Internal consistency: limits, vocabularies, positions == prefix count == resume position,
  // ids < vocab_size, prefix hash, payload sizes implied by the geometry, fixed file names.
  // Throws Error naming `where` and the field.
  void validate(const std::string& where) const;
  // The proof's witness alone (part of validate()): all of it or none, from version 3.
  void validate_witness(const std::string& where) const;

  // Bytes of one payload file implied by the geometry (2 * layers * kv_heads * P * head_dim).
  uint64_t payload_bytes() const;

  // The coordinates a target must match for a strict import, in check order, as
  // (field name, canonical value) pairs: the kTarget fields of the field list, in its order
  // (model identity, architecture and shape, tokenizer identity, geometry without positions,
  // RoPE, Q/K norm, representation, numerics). kv compare uses the same list to prove that two
  // snapshots align.
  std::vector<std::pair<std::string, std::string>> target_fields() const;
};

// SHA-256 (hex) of token ids written as int32 little-endian.
std::string prefix_hash(const std::vector<int32_t>& tokens);
// SHA-256 (hex) of logits written as f32 little-endian (proof.boundary_logits_sha256).
std::string logits_hash(std::span<const float> logits);
// Blocks of a payload row of P positions: ceil(P / 16).
inline int proof_blocks_per_layer(int positions) { return (positions + kProofBlockPositions - 1) / kProofBlockPositions; }
// "layer 2, block 5 (positions 80-95)": the coordinates of proof.blocks[index].
std::string proof_block_name(const Geometry& g, size_t index);

// ---- The mapped extension (ember.kv-mapped.v1) -------------------------------------------
// A mapped cache is a snapshot directory of the same three files whose manifest says
// "format": "ember.kv-mapped" and carries one more top-level object, "mapping" (last): the
// provenance below. Everything else (fields, rules, payload layout, hashes) is the native
// format's; one parser, one reader and one writer serve both (docs/mapping.md).
inline constexpr const char* kMappedFormat = "ember.kv-mapped";

// How the source and the target of a translation relate, as the user stated it (map fit /
// map hybrid --relation; docs/mapping.md, "Relation"): the same weights in two storage types,
// two models sharing a base, or different models. Recorded in mappers, mapped caches and
// receipts, never inferred.
inline constexpr const char* kRelations[] = {"quantization-boundary", "same-base", "cross-model"};
bool is_relation(const std::string& s);

struct MappedProvenance {
  std::string kind;               // identity | ridge | affine | hybrid
  std::string relation;           // one of kRelations
  std::string mapper_hash;        // "" only for an unmapped hybrid (a == s)
  std::string calibration_split_hash;
  int shared_layers = 0;          // s
  int anchor = 0;                 // a (a == n_layers: pure mapping)
  std::vector<std::string> layer_roles;  // per layer: reused | mapped | recomputed | kv-projected
  std::string source_model_identity;
  std::string source_manifest_sha256;  // SHA-256 of the source snapshot's manifest.json bytes
  std::string source_prefix_sha256;
  // Whether a translator registry vouched for the mapper when it was applied: "unregistered"
  // (no --registry) or "registered <entry id> sha256:<hex of the entry's canonical JSON>"
  // (contract/registry.h). Optional: "" (a cache written before the field) is not written.
  std::string registration;

  nlohmann::ordered_json to_json() const;  // fixed key order (kv/manifest_fields.h)
  // Rules that need the manifest: one role per layer, shared_layers <= anchor <= layers.
  void validate(const SnapshotManifest& m, const std::string& where) const;
};

// ---- The foreign extension (ember.kv-foreign.v1) ------------------------------------------
// A cache another engine computed, imported for the same model: the same three files with
// "format": "ember.kv-foreign" and one more top-level object, "foreign" (last). Today's sources:
// llama.cpp's `ggsq` sequence state (kv/llamacpp_state.h) and the safetensors layouts of mlx-lm
// and vLLM, which torch-made caches share (kv/safetensors_cache.h). Its numerics are not
// ember's: numerics.contract is kForeignContract, so no strict import (kv/import.h) ever
// matches it, `kv replay` refuses it unless --allow-foreign, and `kv compare` labels the pair
// cross-engine (docs/compare.md).
inline constexpr const char* kForeignFormat = "ember.kv-foreign";
inline constexpr const char* kForeignContract = "foreign";

// What every foreign cache records, whatever computed it, plus an engine-specific `details`
// object whose members the row of its source format fixes (manifest.cpp: foreign_sources()):
//   ggsq (llama.cpp)         {"v_layout", "k_rotation", "v_rotation"}
//   safetensors-mlx / -vllm  {"layout"}
struct ForeignProvenance {
  std::string engine;          // what computed the K/V: "llama.cpp", "mlx", "vllm", "torch", ...
  std::string format;          // the source file format: "ggsq" | "safetensors-mlx" | "safetensors-vllm"
  int format_version = 0;      // ggsq: 3; safetensors: 1
  // The element types the source held: ggml names for ggsq (f32|f16|bf16|q8_0|q4_0|q4_1|q5_0|
  // q5_1|iq4_nl), f32|f16|bf16 for safetensors.
  std::string cache_type_k;
  std::string cache_type_v;
  // exact: f16 bits as the source held them; rounded-to-f16: decoded to f32, then f32 -> f16
  // round-to-nearest-even (ember caches hold f16)
  std::string conversion;
  // argument (--resume-token) | ember-last-prompt-token (argmax of ember's logits for the
  // last prompt token evaluated over the imported cache of the positions before it)
  std::string resume_source;
  std::string source_sha256;   // hex SHA-256 of the imported bytes (a vLLM directory: its files in layer order)
  uint64_t source_bytes = 0;
  // Engine-specific, ordered as its format's row lists them. For ggsq: v_layout transposed
  // (llama.cpp without flash attention) | rows; k_rotation / v_rotation none | hadamard-N (llama.cpp
  // stored quantized K (V) rotated by an orthonormal Walsh-Hadamard matrix per N elements of each
  // head; the import undid it). For safetensors: layout mlx | vllm.
  std::vector<std::pair<std::string, std::string>> details;
  std::string detail(const std::string& key) const;  // "" when absent

  nlohmann::ordered_json to_json() const;  // fixed key order (kv/manifest_fields.h)
  void validate(const std::string& where) const;
};

// ---- The one payload serializer ------------------------------------------------------------
enum class Payload { keys, values };
inline const char* payload_file(Payload p) { return p == Payload::keys ? kKeysFile : kValuesFile; }
inline const char* payload_field(Payload p) { return p == Payload::keys ? "payload.keys" : "payload.values"; }

// Writes positions [0, n_pos) of every (layer, kv_head) of layers [layer_begin, layer_end)
// (all layers by default), in that order, f16 little-endian: with all layers, exactly the
// bytes of keys.f16le / values.f16le. The only code that serializes a cache: files, hashers,
// KVC1 tensors and counters all go through it, so a hash is always over the bytes written.
void write_payload(const model::KvCache& c, Payload which, ByteSink& out, int layer_begin = 0,
                   int layer_end = -1);

// What every reader and writer checks on one payload stream as it passes: its SHA-256, its
// length and the first non-finite f16 (exponent bits all ones: +-Inf or NaN) with its
// coordinates in the [layer][kv_head][position][dim] layout of `g`. Forwards to `inner`.
// Each byte is hashed once: for a version 1 manifest into the whole-stream SHA-256; for
// version 2 into its (layer, block)'s SHA-256, and the payload's hash is the SHA-256 of those
// 32-byte digests in order (so the block digests come from the same pass).
class PayloadCheck final : public ByteSink {
 public:
  PayloadCheck(const SnapshotManifest& m, ByteSink* inner = nullptr);
  ~PayloadCheck() override;
  void write(const void* data, size_t n) override;
  using ByteSink::write;
  std::string sha256();  // hex, after the last write (the stream is closed by the first call)
  // Version 2: the digests of the (layer, block) pieces, layer-major (complete after sha256()).
  const std::vector<Digest>& block_digests() const { return blocks_; }
  // "" when every value so far was finite, else e.g. "NaN (f16 0x7e00) at layer 1, kv_head 0,
  // position 3, dim 5".
  const std::string& first_non_finite() const { return bad_; }

 private:
  void note(uint16_t v, uint64_t index);  // records v if it is the first non-finite value
  void hash_blocks(const uint8_t* b, size_t n);
  void finish_layer();
  Geometry g_;
  bool blocked_;
  ByteSink* inner_;
  Sha256 hash_;
  uint64_t values_ = 0;
  int carry_ = -1;  // a low byte waiting for its high byte (writes may split a value)
  std::string bad_;
  // Version 2: the open layer's block hashers, and the digests of the layers done.
  int layer_ = -1;
  std::vector<std::unique_ptr<Sha256>> open_;
  std::vector<Digest> blocks_;
  bool finished_ = false;
  std::string hex_;
};

// The proof.blocks entries of two payload streams (PayloadCheck::block_digests after sha256()):
// hex SHA-256(kd || vd) per block.
std::vector<std::string> proof_blocks(const PayloadCheck& keys, const PayloadCheck& values);
// A version 2 manifest's blocks against two checked streams (closes them: sha256()): the first
// block that differs is named, with the payload that differs ("<where>: proof.blocks[i]:
// expected <want> (manifest), found <got> <found_label>: K rows of layer l, block b (positions
// a-z)"; where is the keys' or the values' source). Nothing for a version 1 manifest.
void check_proof_blocks(const SnapshotManifest& m, PayloadCheck& keys, PayloadCheck& values,
                        const std::string& keys_where, const std::string& values_where,
                        const std::string& found_label);

// The verdict on a payload stream, in this order: its SHA-256 against `want` (a mismatch
// means the bytes are not the sealed ones: "<where>: <field>.sha256: expected <want> <label>,
// found <got> <found_label>"), then finiteness unless allowed ("<where>: <field>: expected
// finite f16 values, found NaN ... at layer l, kv_head h, position p, dim d").
void check_payload_stream(PayloadCheck& c, const std::string& want, const std::string& where,
                          const std::string& field, const std::string& want_label,
                          const std::string& found_label, bool allow_non_finite);

}  // namespace ember::kv
