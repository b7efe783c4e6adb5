#pragma once
// One field list per manifest schema (gemma.cpp's VisitFields): every member of
// SnapshotManifest, MappedProvenance and ForeignProvenance that manifest.json holds is named
// once below, with what the reader accepts, what validate() requires of it alone and the roles
// it plays. The writer (to_object, to_json), the strict reader, the per-field rules of
// validate(), target_fields() and kv compare's representation coordinates all walk these
// lists, so a field added or removed here is added or removed everywhere at once
// (tests/kv/manifest_fields_test.cpp checks that they agree).
//
// What stays outside, as code, because it is not one field's business: the rules relating
// fields (positions == prefix count == resume position, GQA, payload sizes, a foreign format's
// row) in validate(), and the engine's side of each target field (describe_target,
// kv/target.cpp; a test checks that it fills every one).
//
// A list is a function template over the struct, const or not, and a visitor called as
// v(member, FieldSpec) in the written order (which is also the read order and the order of
// target_fields()). Visited value types: std::string, int, int64_t, uint64_t, float, bool,
// std::vector<int32_t> (prefix.count and prefix.tokens), std::vector<std::string> and the
// details pairs (an object of strings).
#include <concepts>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kv/snapshot.h"
#include "kv/strict_json.h"

namespace ember::kv {

enum FieldRole : unsigned {
  kTarget = 1u << 0,          // compared by a strict import (target_fields(), kv/import.h)
  kRepresentation = 1u << 1,  // how the cached numbers encode K/V: kv compare's coordinates
  kOptional = 1u << 2,        // written only when set (true, non-empty), read only when present
  kFormatTag = 1u << 3,       // "format": the caller reads it first, to pick the kind
  kVersionTag = 1u << 4,      // refused at once when outside the rule's limits (the versions
                              // this reader knows): another version's keys differ, so it is
                              // named before any missing key; the fields' `since` follow it
  kCount = 1u << 5,           // the length of the token list it is visited with
};

// What the reader accepts: a string's maximum length (hi), an integer's range [lo, hi].
struct Limits {
  int64_t lo = 0;
  uint64_t hi = 0;
  static constexpr Limits chars(uint64_t n) { return {0, n}; }
  static constexpr Limits ints(int64_t lo, uint64_t hi) { return {lo, hi}; }
};

// What validate() requires of one field alone (the reader only checks types and limits, and a
// manifest built in memory never went through it). Each kind has one message, in
// manifest_fields.cpp; rules relating fields are validate()'s own code.
struct Rule {
  enum Kind { none, equal_to, one_of, hex64, hex64_or_empty, printable, non_empty, in_limits, positive, architecture };
  Kind kind = none;
  const char* text = nullptr;                // equal_to: the string; non_empty: what is expected
  int64_t value = 0;                         // equal_to: the integer
  std::span<const char* const> allowed = {};  // one_of (each element, for a list of strings)

  static constexpr Rule equals(const char* s) { return {equal_to, s}; }
  static constexpr Rule equals(int64_t v) { return {equal_to, nullptr, v}; }
  static constexpr Rule any_of(std::span<const char* const> a) { return {one_of, nullptr, 0, a}; }
  static constexpr Rule sha256() { return {hex64}; }
  static constexpr Rule sha256_or_empty() { return {hex64_or_empty}; }
  static constexpr Rule ascii() { return {printable}; }
  static constexpr Rule named(const char* expected) { return {non_empty, expected}; }
  static constexpr Rule within_limits() { return {in_limits}; }
  static constexpr Rule finite_positive() { return {positive}; }
  static constexpr Rule known_architecture() { return {architecture}; }  // gguf/arch.h's table
};

struct FieldSpec {
  // Below the schema's own object ("rope.scaling.type"); with the object's name in front
  // ("mapping.kind") it is the field's name in every error and in target_fields().
  const char* path;
  Limits limits = {};
  unsigned roles = 0;  // FieldRole bits
  Rule rule = {};
  // When absent: the expected text of the reader's error, instead of StrictObject's "present"
  // (for keys that older writers did not write, so the message says what to do).
  const char* missing = nullptr;
  // An object of strings (foreign.details): its members, in order.
  std::span<const char* const> members = {};
  // The manifest version that added the field (0: every version): a document of an older
  // version neither holds it (an unknown key there) nor is required to; the writer writes it
  // only from that version.
  int since = 0;
};

// The closed vocabularies of the one-of rules.
inline constexpr const char* kRopeLayouts[] = {"normal", "neox"};
inline constexpr const char* kRopeScalings[] = {"none", "linear", "llama3"};
inline constexpr const char* kQkNorms[] = {kQkNormNone, kQkNormRmsPerHead};
inline constexpr const char* kDtypes[] = {"f16"};
inline constexpr const char* kByteOrders[] = {"little-endian"};
inline constexpr const char* kPayloadLayouts[] = {"layer,kv_head,position,dim"};
inline constexpr const char* kKeyStates[] = {kKeyStatePostRope, kKeyStatePreRope};
inline constexpr const char* kValueStates[] = {kValueStateProjected};
inline constexpr const char* kSelections[] = {"greedy-argmax"};
inline constexpr const char* kMappingKinds[] = {"identity", "ridge", "affine", "hybrid"};
inline constexpr const char* kLayerRoles[] = {"reused", "mapped", "recomputed", "kv-projected"};
inline constexpr const char* kConversions[] = {"exact", "rounded-to-f16"};
inline constexpr const char* kResumeSources[] = {"argument", "ember-last-prompt-token"};

// The members of a foreign format's "details", in order (none for an unknown format).
std::span<const char* const> foreign_detail_keys(const std::string& format);

// ---- ember.kv-snapshot.v1 (and the shared part of every kind) --------------------------------
template <class M, class V>
  requires std::same_as<std::remove_const_t<M>, SnapshotManifest>
void visit_fields(M& m, V&& v) {
  using L = Limits;
  using R = Rule;
  constexpr unsigned kCoord = kTarget | kRepresentation;
  v(m.format, {"format", L::chars(64), kFormatTag, R::equals(kSnapshotFormat)});
  v(m.version, {"version", L::ints(kOldestSnapshotVersion, kSnapshotVersion), kVersionTag, R::within_limits()});
  v(m.producer, {"producer", L::chars(128), 0, R::ascii()});
  v(m.model.identity, {"model.identity", L::chars(128), kTarget, R::sha256()});
  v(m.model.architecture, {"model.architecture", L::chars(64), kTarget, R::known_architecture()});
  v(m.model.vocab_size, {"model.vocab_size", L::ints(1, kMaxVocab), kTarget, R::within_limits()});
  v(m.model.embedding_size, {"model.embedding_size", L::ints(1, 1 << 20), kTarget, R::within_limits()});
  // A multiple of geometry.kv_heads: validate().
  v(m.model.query_heads, {"model.query_heads", L::ints(1, kMaxKvHeads * 64), kTarget});
  v(m.tokenizer.identity, {"tokenizer.identity", L::chars(128), kTarget, R::sha256()});
  v(m.geometry.layers, {"geometry.layers", L::ints(1, kMaxLayers), kTarget, R::within_limits()});
  v(m.geometry.kv_heads, {"geometry.kv_heads", L::ints(1, kMaxKvHeads), kTarget, R::within_limits()});
  // Even (RoPE rotates pairs): validate().
  v(m.geometry.head_dim, {"geometry.head_dim", L::ints(1, kMaxHeadDim), kTarget, R::within_limits()});
  v(m.geometry.positions, {"geometry.positions", L::ints(1, kMaxPositions), 0, R::within_limits()});
  v(m.rope.layout, {"rope.layout", L::chars(32), kCoord, R::any_of(kRopeLayouts)});
  v(m.rope.theta, {"rope.theta", {}, kCoord, R::finite_positive()});
  v(m.rope.scaling_type, {"rope.scaling.type", L::chars(32), kCoord, R::any_of(kRopeScalings)});
  v(m.rope.scaling_factor, {"rope.scaling.factor", {}, kCoord, R::finite_positive()});
  v(m.rope.original_context, {"rope.scaling.original_context", L::ints(0, INT32_MAX), kCoord});
  v(m.rope.low_freq_factor, {"rope.scaling.low_freq_factor", {}, kCoord});
  v(m.rope.high_freq_factor, {"rope.scaling.high_freq_factor", {}, kCoord});
  v(m.attention.qk_norm, {"attention.qk_norm", L::chars(64), kCoord, R::any_of(kQkNorms)});
  v(m.attention.qkv_bias, {"attention.qkv_bias", {}, kTarget});
  v(m.representation.dtype, {"representation.dtype", L::chars(32), kCoord, R::any_of(kDtypes)});
  v(m.representation.byte_order,
    {"representation.byte_order", L::chars(32), kRepresentation, R::any_of(kByteOrders)});
  v(m.representation.layout,
    {"representation.layout", L::chars(64), kRepresentation, R::any_of(kPayloadLayouts)});
  v(m.representation.keys, {"representation.keys", L::chars(64), kCoord, R::any_of(kKeyStates)});
  v(m.representation.values, {"representation.values", L::chars(64), kCoord, R::any_of(kValueStates)});
  v(m.numerics.contract, {"numerics.contract", L::chars(64), kTarget, R::named("a non-empty name")});
  v(m.numerics.engine_fingerprint,
    {"numerics.engine_fingerprint", L::chars(4096), kTarget, R::named("a non-empty printable string")});
  // The cursor (count == geometry.positions == resume.position, ids < vocab_size, the hash of
  // the ids): validate().
  v(m.prefix.tokens, {"prefix.count", L::ints(1, kMaxPositions), kCount});
  v(m.prefix.sha256, {"prefix.sha256", L::chars(128), 0, R::sha256()});
  v(m.prefix.tokens, {"prefix.tokens"});
  v(m.resume.token, {"resume.token", L::ints(0, INT32_MAX)});
  v(m.resume.position, {"resume.position", L::ints(0, INT64_MAX)});
  v(m.resume.selection, {"resume.selection", L::chars(64), 0, R::any_of(kSelections)});
  // Its one value is true: a manifest within the context omits the key.
  v(m.past_context, {"past_context", {}, kOptional});
  // bytes == the geometry's payload size: validate().
  v(m.keys.file, {"payload.keys.file", L::chars(64), 0, R::equals(kKeysFile)});
  v(m.keys.bytes, {"payload.keys.bytes", L::ints(0, UINT64_MAX)});
  v(m.keys.sha256, {"payload.keys.sha256", L::chars(128), 0, R::sha256()});
  v(m.values.file, {"payload.values.file", L::chars(64), 0, R::equals(kValuesFile)});
  v(m.values.bytes, {"payload.values.bytes", L::ints(0, UINT64_MAX)});
  v(m.values.sha256, {"payload.values.sha256", L::chars(128), 0, R::sha256()});
  // Version 2. One entry per (layer, block): layers * ceil(positions / 16), validate().
  v(m.proof.block_positions,
    {"proof.block_positions", L::ints(1, kMaxPositions), 0, R::equals(int64_t(kProofBlockPositions)), nullptr, {}, 2});
  // Absent for a state no ember prefill produced (mapped, foreign).
  v(m.proof.boundary_logits_sha256,
    {"proof.boundary_logits_sha256", L::chars(128), kOptional, R::sha256_or_empty(), nullptr, {}, 2});
  v(m.proof.blocks, {"proof.blocks", L::chars(128), 0, R::sha256(), nullptr, {}, 2});
  // Version 3, all four present or none; witness_tokens[0] == resume.token, ids < vocab_size,
  // one attention hash per layer: validate().
  v(m.proof.witness_tokens,
    {"proof.witness_length", L::ints(1, kMaxWitnessLength), kCount | kOptional, {}, nullptr, {}, 3});
  v(m.proof.witness_tokens, {"proof.witness_tokens", {}, kOptional, {}, nullptr, {}, 3});
  v(m.proof.witness_logits_sha256,
    {"proof.witness_logits_sha256", L::chars(128), kOptional, R::sha256_or_empty(), nullptr, {}, 3});
  v(m.proof.witness_attention_sha256,
    {"proof.witness_attention_sha256", L::chars(128), kOptional, R::sha256(), nullptr, {}, 3});
}

// ---- The "mapping" object of ember.kv-mapped.v1 ------------------------------------------------
template <class P, class V>
  requires std::same_as<std::remove_const_t<P>, MappedProvenance>
void visit_fields(P& p, V&& v) {
  using L = Limits;
  using R = Rule;
  v(p.kind, {"kind", L::chars(32), 0, R::any_of(kMappingKinds)});
  v(p.relation, {"relation", L::chars(32), 0, R::any_of(kRelations),
                 "quantization-boundary, same-base or cross-model (mapped caches written before the relation "
                 "label are refused; re-run map apply or map hybrid)"});
  // Required unless the kind is hybrid: validate().
  v(p.mapper_hash, {"mapper_hash", L::chars(128), 0, R::sha256_or_empty()});
  v(p.calibration_split_hash, {"calibration_split_hash", L::chars(128)});
  v(p.shared_layers, {"shared_layers", L::ints(0, kMaxLayers)});
  // shared_layers <= anchor <= geometry.layers: validate().
  v(p.anchor, {"anchor", L::ints(0, kMaxLayers)});
  // One per layer: validate().
  v(p.layer_roles, {"layer_roles", {}, 0, R::any_of(kLayerRoles)});
  v(p.source_model_identity, {"source_model_identity", L::chars(128), 0, R::sha256()});
  v(p.source_manifest_sha256, {"source_manifest_sha256", L::chars(128), 0, R::sha256_or_empty()});
  v(p.source_prefix_sha256, {"source_prefix_sha256", L::chars(128)});
  // "unregistered" | "registered <id> sha256:<hex>": validate().
  v(p.registration, {"registration", L::chars(256), kOptional});
}

// ---- The "foreign" object of ember.kv-foreign.v1 -----------------------------------------------
// Most of its rules depend on the format's row (manifest.cpp: foreign_sources()), so they are
// ForeignProvenance::validate()'s code.
template <class P, class V>
  requires std::same_as<std::remove_const_t<P>, ForeignProvenance>
void visit_fields(P& p, V&& v) {
  using L = Limits;
  using R = Rule;
  v(p.engine, {"engine", L::chars(32)});
  v(p.format, {"format", L::chars(32)});
  v(p.format_version, {"format_version", L::ints(0, INT32_MAX)});
  v(p.cache_type_k, {"cache_type_k", L::chars(16)});
  v(p.cache_type_v, {"cache_type_v", L::chars(16)});
  v(p.conversion, {"conversion", L::chars(32), 0, R::any_of(kConversions)});
  v(p.resume_source, {"resume_source", L::chars(32), 0, R::any_of(kResumeSources)});
  v(p.source_sha256, {"source_sha256", L::chars(128), 0, R::sha256()});
  v(p.source_bytes, {"source_bytes", L::ints(0, UINT64_MAX)});
  // The reader visits it after "format", so its members are the format's (a member the row
  // does not name is refused as unknown).
  v(p.details, {"details", L::chars(32), 0, {}, nullptr, foreign_detail_keys(p.format)});
}

// ---- The jobs the lists drive (manifest_fields.cpp) --------------------------------------------
// `object` names the schema's object in errors: "" for the manifest, "mapping", "foreign".

// The fields as JSON, in list order; optional fields that are not set are left out.
ordered_json write_fields(const SnapshotManifest& m);
ordered_json write_fields(const MappedProvenance& p);
ordered_json write_fields(const ForeignProvenance& p);

// Reads every field of the list from `o` strictly (missing, mistyped and out-of-limit values
// refused, nested objects closed with done()); the caller calls o.done(). The manifest's
// "format" is the caller's (kFormatTag).
void read_fields(StrictObject& o, SnapshotManifest& m);
void read_fields(StrictObject& o, MappedProvenance& p);
void read_fields(StrictObject& o, ForeignProvenance& p);

// Each field's own rule, in list order (Error naming `where` and the field).
void check_field_rules(const SnapshotManifest& m, const std::string& where);
void check_field_rules(const MappedProvenance& p, const std::string& where);
void check_field_rules(const ForeignProvenance& p, const std::string& where);

// The kTarget fields as (name, canonical text) pairs: strings as they are, integers in
// decimal, booleans as true|false, f32 values with the digits the manifest JSON holds.
std::vector<std::pair<std::string, std::string>> target_values(const SnapshotManifest& m);

}  // namespace ember::kv
