// The ember.kv-snapshot.v1 manifest and its kinds: the strict parse, the canonical JSON and the
// rules that relate fields. Each field alone is its list's (kv/manifest_fields.h).
#include <bit>
#include <cstring>

#include "kv/manifest_fields.h"
#include "kv/manifest_rules.h"
#include "kv/seal.h"
#include "kv/state.h"
#include "kv/strict_json.h"
#include "util/error.h"
#include "util/hex.h"
#include "util/sha256.h"

namespace ember::kv {
namespace {

// The foreign sources ember imports, one row each: what a "foreign" object may say for that
// format (engine, version, cache types) and the members of its "details", in order.
struct ForeignSource {
  const char* format;
  const char* engine;  // nullptr: any engine name (a safetensors layout is written by several)
  int version;
  std::vector<const char*> cache_types;
  std::vector<const char*> detail_keys;
};

const std::vector<ForeignSource>& foreign_sources() {
  static const std::vector<ForeignSource> rows = {
      {"ggsq", "llama.cpp", 3, {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl"},
       {"v_layout", "k_rotation", "v_rotation"}},
      {"safetensors-mlx", nullptr, 1, {"f32", "f16", "bf16"}, {"layout"}},
      {"safetensors-vllm", nullptr, 1, {"f32", "f16", "bf16"}, {"layout"}},
  };
  return rows;
}

const ForeignSource* foreign_source(const std::string& format) {
  for (const ForeignSource& r : foreign_sources())
    if (format == r.format) return &r;
  return nullptr;
}

}  // namespace

std::span<const char* const> foreign_detail_keys(const std::string& format) {
  const ForeignSource* r = foreign_source(format);
  return r ? std::span<const char* const>(r->detail_keys) : std::span<const char* const>{};
}

std::string prefix_hash(const std::vector<int32_t>& tokens) {
  Sha256 h;
  for (int32_t t : tokens) {
    uint8_t b[4];
    const uint32_t u = uint32_t(t);
    b[0] = uint8_t(u); b[1] = uint8_t(u >> 8); b[2] = uint8_t(u >> 16); b[3] = uint8_t(u >> 24);
    h.update(b, 4);
  }
  return to_hex(h.finish());
}

std::string logits_hash(std::span<const float> logits) {
  Sha256 h;
  // The bytes are f32 little-endian whatever the host: one update where that is memory order.
  if constexpr (std::endian::native == std::endian::little) {
    h.update(logits.data(), logits.size() * sizeof(float));
    return to_hex(h.finish());
  }
  for (float f : logits) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    const uint8_t b[4] = {uint8_t(u), uint8_t(u >> 8), uint8_t(u >> 16), uint8_t(u >> 24)};
    h.update(b, 4);
  }
  return to_hex(h.finish());
}

uint64_t SnapshotManifest::payload_bytes() const {
  // Each factor is range-checked by validate(); the product of the limits fits in 2^56.
  return uint64_t(2) * uint64_t(std::max(geometry.layers, 0)) * uint64_t(std::max(geometry.kv_heads, 0)) *
         uint64_t(std::max(geometry.positions, 0)) * uint64_t(std::max(geometry.head_dim, 0));
}

std::string SnapshotManifest::to_json() const { return state_manifest_json(StateHeader{*this, {}}, "manifest"); }

ordered_json SnapshotManifest::to_object() const { return write_fields(*this); }

namespace {

// The provenance object `key` of the document, strictly (its rules: validate_state()).
template <class P>
P read_provenance(StrictObject& top, const char* key) {
  P p;
  StrictObject o = top.object(key);
  read_fields(o, p);
  o.done();
  return p;
}

// Only a foreign manifest may name the foreign contract, and it must.
void check_contract_kind(const SnapshotManifest& m, bool foreign, const std::string& where);

// Every rule of a state's document: the manifest's, its provenance's, and the contract's kind.
void validate_state(const StateHeader& h, const std::string& where) {
  h.manifest.validate(where);
  if (const MappedProvenance* m = h.mapping()) m->validate(h.manifest, where);
  if (const ForeignProvenance* f = h.foreign()) f->validate(where);
  check_contract_kind(h.manifest, h.is_foreign(), where);
}

void check_contract_kind(const SnapshotManifest& m, bool foreign, const std::string& where) {
  if (foreign && m.numerics.contract != kForeignContract)
    fail_field(where, "numerics.contract", std::string(kForeignContract) + " (a foreign cache)",
               quote(m.numerics.contract));
  if (!foreign && m.numerics.contract == kForeignContract)
    fail_field(where, "numerics.contract", "an ember numerics contract (only ember.kv-foreign names 'foreign')",
               quote(m.numerics.contract));
}

}  // namespace

SnapshotManifest SnapshotManifest::from_json(const std::string& text, const std::string& where) {
  const StateHeader s = parse_state_manifest(text, where);
  require_kind(s, Accept::native, where);
  return s.manifest;
}

StateHeader parse_state_manifest(const std::string& text, const std::string& where) {
  if (text.size() > kMaxManifestBytes)
    fail_field(where, "size", "at most " + std::to_string(kMaxManifestBytes) + " bytes",
               std::to_string(text.size()) + " bytes");
  // A manifest holds its prefix ids and fewer than 100 other values: anything bigger is
  // refused while parsing, so the DOM stays within ~80 bytes per allowed value.
  const nlohmann::json doc = parse_json_strict(text, where, 16, kMaxManifestValues);
  StrictObject top(doc, "", where);
  // format and version first: an unknown version is named as such, not as a missing key.
  const std::string format = top.string("format", 64);
  if (format != kSnapshotFormat && format != kMappedFormat && format != kForeignFormat)
    fail_field(where, "format",
               std::string(kSnapshotFormat) + " (or " + kMappedFormat + ", " + kForeignFormat + ")", quote(format));
  StateHeader s;
  read_fields(top, s.manifest);
  if (format == kMappedFormat) s.provenance = read_provenance<MappedProvenance>(top, "mapping");
  if (format == kForeignFormat) s.provenance = read_provenance<ForeignProvenance>(top, "foreign");
  const std::string seal = top.string(kSealKey, 128);
  if (doc.contains(kSignatureKey)) {
    top.object(kSignatureKey);  // marks it read, and refuses a non-object by name
    s.manifest.signature = signature_from_json(doc[kSignatureKey], where);
  }
  top.done();  // a native manifest with a "mapping" key is refused here
  validate_state(s, where);
  // Last, so that an edit breaking a rule is named by that rule: any other edit (a resume
  // token, payload entries swapped with their hashes, a mapped cache relabelled native) still
  // changes the document the seal was computed over.
  const std::string want = manifest_seal(doc);
  if (seal != want)
    fail_field(where, "seal", want + " (SHA-256 of the canonical manifest without seal and signature)", quote(seal));
  s.manifest.seal = seal;
  if (s.manifest.signature && !ed25519_verify(*s.manifest.signature, seal_signing_message(seal)))
    fail_field(where, "signature.value", "a valid Ed25519 signature of the seal by signature.public_key",
               "an invalid signature (the manifest or the signature was altered)");
  return s;
}

const char* StateHeader::format() const {
  return mapped() ? kMappedFormat : is_foreign() ? kForeignFormat : kSnapshotFormat;
}

bool accepts(Accept accept, StateKind kind) {
  switch (accept) {
    case Accept::native: return kind == StateKind::native;
    case Accept::mapped: return kind == StateKind::mapped;
    case Accept::foreign: return kind == StateKind::foreign;
    case Accept::any: return true;
  }
  return false;
}

void require_kind(const StateHeader& s, Accept accept, const std::string& where) {
  if (s.is_foreign() && accept != Accept::foreign && accept != Accept::any)
    fail_field(where, "format",
               std::string(accept == Accept::mapped ? kMappedFormat : kSnapshotFormat) +
                   (accept == Accept::mapped ? " (a mapped cache)" : " (a native snapshot)"),
               quote(kForeignFormat) + " (a foreign cache, engine " + s.foreign()->engine +
                   ": its numerics are not ember's; kv compare reads it, kv verify and kv replay only with --allow-foreign)");
  if (accept == Accept::foreign && !s.is_foreign())
    fail_field(where, "format", std::string(kForeignFormat) + " (a foreign cache)", quote(s.format()));
  if (accept == Accept::native && s.mapped())
    fail_field(where, "format", std::string(kSnapshotFormat) + " (a native snapshot)",
               quote(kMappedFormat) + " (a mapped cache: ember map replay and kv compare read it)");
  if (accept == Accept::mapped && !s.mapped())
    fail_field(where, "format", std::string(kMappedFormat) + " (a mapped cache)",
               quote(kSnapshotFormat) + " (a native snapshot: kv replay reads it)");
}

namespace {

// The document of any kind without seal and signature: what the seal is computed over.
ordered_json state_object(const StateHeader& h) {
  ordered_json j = h.manifest.to_object();
  if (const MappedProvenance* m = h.mapping()) {
    j["format"] = kMappedFormat;
    j["mapping"] = m->to_json();
  }
  if (const ForeignProvenance* f = h.foreign()) {
    j["format"] = kForeignFormat;
    j["foreign"] = f->to_json();
  }
  return j;
}

}  // namespace

std::string state_manifest_json(const StateHeader& h, const std::string& where) {
  validate_state(h, where);
  ordered_json j = state_object(h);
  const std::string seal = manifest_seal(nlohmann::json(j));
  j[kSealKey] = seal;
  if (h.manifest.signature) {
    // A signature made before the manifest changed would be refused by every reader; refuse
    // it here, before anything is written.
    if (!ed25519_verify(*h.manifest.signature, seal_signing_message(seal)))
      fail_field(where, "signature", "a signature of this manifest's seal " + seal, "a signature of another manifest");
    j[kSignatureKey] = signature_to_json(*h.manifest.signature);
  }
  return pretty_json(j);
}

std::string state_seal(const StateHeader& h) { return manifest_seal(nlohmann::json(state_object(h))); }

void sign_manifest(StateHeader& h, const std::string& private_key_pem) {
  h.manifest.signature = ed25519_sign(private_key_pem, seal_signing_message(state_seal(h)));
  h.manifest.seal = state_seal(h);
}

ordered_json ForeignProvenance::to_json() const { return write_fields(*this); }

std::string ForeignProvenance::detail(const std::string& key) const {
  for (const auto& [k, v] : details)
    if (k == key) return v;
  return "";
}

void ForeignProvenance::validate(const std::string& where) const {
  // The format's row first: every other rule but the engine name's depends on it.
  const ForeignSource* src = foreign_source(format);
  if (!src) fail_field(where, "foreign.format", "ggsq | safetensors-mlx | safetensors-vllm", quote(format));
  if (engine.empty() || engine.size() > 32 ||
      engine.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789._-") != std::string::npos)
    fail_field(where, "foreign.engine", "an engine name ([a-z0-9._-]{1,32}: llama.cpp, mlx, vllm, torch, ...)",
               quote(engine));
  if (src->engine && engine != src->engine)
    fail_field(where, "foreign.engine", std::string(src->engine) + " (format " + format + ")", quote(engine));
  require_range(where, "foreign.format_version", format_version, src->version, src->version);
  for (const auto& [field, v] : {std::pair<const char*, const std::string*>{"foreign.cache_type_k", &cache_type_k},
                                 {"foreign.cache_type_v", &cache_type_v}})
    require_one_of(where, field, *v, std::span<const char* const>(src->cache_types));
  check_field_rules(*this, where);
  if ((cache_type_k == "f16" && cache_type_v == "f16") != (conversion == "exact"))
    fail_field(where, "foreign.conversion",
               std::string(cache_type_k == "f16" && cache_type_v == "f16" ? "exact" : "rounded-to-f16") +
                   " (cache types " + cache_type_k + "/" + cache_type_v + ")",
               quote(conversion));
  if (source_bytes == 0) fail_field(where, "foreign.source_bytes", "> 0", "0");
  const std::span<const char* const> keys = foreign_detail_keys(format);
  if (details.size() != keys.size())
    fail_field(where, "foreign.details", std::to_string(keys.size()) + " members (format " + format + ")",
               std::to_string(details.size()));
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::string field = std::string("foreign.details.") + keys[i];
    if (details[i].first != keys[i]) fail_field(where, "foreign.details", field, quote(details[i].first));
    const std::string& v = details[i].second;
    if (details[i].first == "v_layout") require_one_of(where, field, v, {"transposed", "rows"});
    if (details[i].first == "k_rotation" || details[i].first == "v_rotation")
      require_one_of(where, field, v,
                     {"none", "hadamard-64", "hadamard-128", "hadamard-256", "hadamard-512", "hadamard-1024",
                      "hadamard-2048", "hadamard-4096"});
    if (details[i].first == "layout" && v != format.substr(format.find('-') + 1))
      fail_field(where, field, quote(format.substr(format.find('-') + 1)) + " (format " + format + ")", quote(v));
  }
}

bool is_relation(const std::string& s) {
  for (const char* r : kRelations)
    if (s == r) return true;
  return false;
}

ordered_json MappedProvenance::to_json() const { return write_fields(*this); }

void MappedProvenance::validate(const SnapshotManifest& m, const std::string& where) const {
  check_field_rules(*this, where);
  if (kind != "hybrid" && mapper_hash.empty())
    fail_field(where, "mapping.mapper_hash", "the mapper's hash", "empty");
  require_range(where, "mapping.anchor", anchor, shared_layers, m.geometry.layers);
  if (int64_t(layer_roles.size()) != m.geometry.layers)
    fail_field(where, "mapping.layer_roles", std::to_string(m.geometry.layers) + " entries (geometry.layers)",
               std::to_string(layer_roles.size()));
  if (!registration.empty() && registration != "unregistered" &&
      (registration.rfind("registered ", 0) != 0 || !is_printable_ascii(registration)))
    fail_field(where, "mapping.registration", "unregistered | registered <id> sha256:<hex>", quote(registration));
}

void SnapshotManifest::validate(const std::string& where) const {
  check_field_rules(*this, where);  // each field alone, in the written order
  // The rules that relate fields, each after the fields it reads passed their own.
  if (geometry.head_dim % 2 != 0)
    fail_field(where, "geometry.head_dim", "an even number (RoPE rotates pairs)",
               std::to_string(geometry.head_dim));
  if (model.query_heads < geometry.kv_heads || model.query_heads % geometry.kv_heads != 0)
    fail_field(where, "model.query_heads",
               "a multiple of geometry.kv_heads (" + std::to_string(geometry.kv_heads) + ")",
               std::to_string(model.query_heads));
  // The cursor: P prefix tokens at [0, P), the resume token at P.
  if (int64_t(prefix.tokens.size()) != geometry.positions)
    fail_field(where, "prefix.count", std::to_string(geometry.positions) + " (geometry.positions)",
               std::to_string(prefix.tokens.size()));
  for (size_t i = 0; i < prefix.tokens.size(); ++i)
    if (prefix.tokens[i] < 0 || prefix.tokens[i] >= model.vocab_size)
      fail_field(where, "prefix.tokens[" + std::to_string(i) + "]",
                 "an id < vocab_size " + std::to_string(model.vocab_size), std::to_string(prefix.tokens[i]));
  if (const std::string h = prefix_hash(prefix.tokens); h != prefix.sha256)
    fail_field(where, "prefix.sha256", h + " (hash of prefix.tokens)", prefix.sha256);
  if (resume.token < 0 || resume.token >= model.vocab_size)
    fail_field(where, "resume.token", "an id < vocab_size " + std::to_string(model.vocab_size),
               std::to_string(resume.token));
  if (resume.position != geometry.positions)
    fail_field(where, "resume.position", std::to_string(geometry.positions) + " (geometry.positions)",
               std::to_string(resume.position));
  const uint64_t want = payload_bytes();
  for (const auto& [e, key] : {std::pair<const PayloadEntry*, const char*>{&keys, "keys"}, {&values, "values"}})
    if (e->bytes != want)
      fail_field(where, std::string("payload.") + key + ".bytes",
                 std::to_string(want) + " (2 * layers * kv_heads * positions * head_dim)", std::to_string(e->bytes));
  // The proof: one block hash per (layer, 16 positions) from version 2, none before.
  const uint64_t blocks = uint64_t(geometry.layers) * uint64_t(proof_blocks_per_layer(geometry.positions));
  if (version >= 2 && blocks > kMaxProofBlocks)
    fail_field(where, "proof.blocks",
               "at most " + std::to_string(kMaxProofBlocks) + " blocks (layers * ceil(positions / 16))",
               std::to_string(blocks));
  if (version >= 2 && proof.blocks.size() != blocks)
    fail_field(where, "proof.blocks",
               std::to_string(blocks) + " entries (geometry.layers * ceil(geometry.positions / " +
                   std::to_string(kProofBlockPositions) + "))",
               std::to_string(proof.blocks.size()));
  if (version < 2 && (!proof.blocks.empty() || !proof.boundary_logits_sha256.empty()))
    fail_field(where, "proof", "none (version " + std::to_string(version) + ")", "a proof (version 2)");
  validate_witness(where);
}

void SnapshotManifest::validate_witness(const std::string& where) const {
  const ProofInfo& p = proof;
  const bool any = !p.witness_tokens.empty() || !p.witness_logits_sha256.empty() ||
                   !p.witness_attention_sha256.empty();
  if (!any) return;
  if (version < 3)
    fail_field(where, "proof.witness_tokens", "none (version " + std::to_string(version) + ")",
               "a witness (version 3)");
  // All or none: a witness missing a part cannot be checked, and must not pass as one.
  if (p.witness_tokens.empty())
    fail_field(where, "proof.witness_tokens", "the witness's tokens (its hashes are present)", "none");
  if (p.witness_logits_sha256.empty())
    fail_field(where, "proof.witness_logits_sha256", "the hash of the witness's logits (its tokens are present)",
               "none");
  if (p.witness_tokens.size() > size_t(kMaxWitnessLength))
    fail_field(where, "proof.witness_length", "at most " + std::to_string(kMaxWitnessLength),
               std::to_string(p.witness_tokens.size()));
  if (p.witness_attention_sha256.size() != size_t(geometry.layers))
    fail_field(where, "proof.witness_attention_sha256",
               std::to_string(geometry.layers) + " hashes (one per layer, geometry.layers)",
               std::to_string(p.witness_attention_sha256.size()));
  for (size_t i = 0; i < p.witness_tokens.size(); ++i)
    if (p.witness_tokens[i] < 0 || p.witness_tokens[i] >= model.vocab_size)
      fail_field(where, "proof.witness_tokens[" + std::to_string(i) + "]",
                 "an id < vocab_size " + std::to_string(model.vocab_size), std::to_string(p.witness_tokens[i]));
  if (p.witness_tokens[0] != resume.token)
    fail_field(where, "proof.witness_tokens[0]", std::to_string(resume.token) + " (resume.token)",
               std::to_string(p.witness_tokens[0]));
}

std::vector<std::pair<std::string, std::string>> SnapshotManifest::target_fields() const {
  return target_values(*this);
}

}  // namespace ember::kv
