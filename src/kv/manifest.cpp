// The ember.kv-snapshot.v1 manifest: canonical JSON out, strict JSON in, consistency rules.
#include <cmath>
#include <cstring>

#include "gguf/arch.h"
#include "kv/seal.h"
#include "kv/state.h"
#include "kv/strict_json.h"
#include "util/error.h"
#include "util/hex.h"
#include "util/sha256.h"

namespace ember::kv {
namespace {

std::string quote(const std::string& s) { return "'" + s + "'"; }

bool is_printable_ascii(const std::string& s) {
  for (unsigned char c : s)
    if (c < 0x20 || c > 0x7e) return false;
  return true;
}

void require_hex64(const std::string& where, const std::string& field, const std::string& v) {
  if (!is_hex(v, 64)) fail_field(where, field, "64 lowercase hex digits (SHA-256)", quote(v));
}

template <typename List>
void require_one_of(const std::string& where, const std::string& field, const std::string& v, const List& allowed) {
  std::string list;
  for (const char* a : allowed) {
    if (v == a) return;
    list += (list.empty() ? "" : "|") + std::string(a);
  }
  fail_field(where, field, "one of " + list, quote(v));
}

void require_range(const std::string& where, const std::string& field, int64_t v, int64_t lo,
                   int64_t hi) {
  if (v < lo || v > hi)
    fail_field(where, field, "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]",
               std::to_string(v));
}

// The canonical text of an f32 field (the same digits to_json() writes).
std::string f32_text(float f) { return ordered_json(double(f)).dump(); }

void require_one_of(const std::string& where, const std::string& field, const std::string& v,
                    std::initializer_list<const char*> allowed) {
  require_one_of<std::initializer_list<const char*>>(where, field, v, allowed);
}

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

std::vector<const char*> foreign_detail_keys(const std::string& format) {
  const ForeignSource* r = foreign_source(format);
  return r ? r->detail_keys : std::vector<const char*>{};
}

}  // namespace

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

uint64_t SnapshotManifest::payload_bytes() const {
  // Each factor is range-checked by validate(); the product of the limits fits in 2^56.
  return uint64_t(2) * uint64_t(std::max(geometry.layers, 0)) * uint64_t(std::max(geometry.kv_heads, 0)) *
         uint64_t(std::max(geometry.positions, 0)) * uint64_t(std::max(geometry.head_dim, 0));
}

std::string SnapshotManifest::to_json() const { return state_manifest_json(StateHeader{*this, {}}, "manifest"); }

ordered_json SnapshotManifest::to_object() const {
  ordered_json j;
  j["format"] = format;
  j["version"] = version;
  j["producer"] = producer;
  j["model"] = {{"identity", model.identity},
                {"architecture", model.architecture},
                {"vocab_size", model.vocab_size},
                {"embedding_size", model.embedding_size},
                {"query_heads", model.query_heads}};
  j["tokenizer"] = {{"identity", tokenizer.identity}};
  j["geometry"] = {{"layers", geometry.layers},
                   {"kv_heads", geometry.kv_heads},
                   {"head_dim", geometry.head_dim},
                   {"positions", geometry.positions}};
  ordered_json scaling = {{"type", rope.scaling_type},
                          {"factor", double(rope.scaling_factor)},
                          {"original_context", rope.original_context},
                          {"low_freq_factor", double(rope.low_freq_factor)},
                          {"high_freq_factor", double(rope.high_freq_factor)}};
  j["rope"] = {{"layout", rope.layout}, {"theta", double(rope.theta)}, {"scaling", scaling}};
  j["attention"] = {{"qk_norm", attention.qk_norm}, {"qkv_bias", attention.qkv_bias}};
  j["representation"] = {{"dtype", representation.dtype},
                         {"byte_order", representation.byte_order},
                         {"layout", representation.layout},
                         {"keys", representation.keys},
                         {"values", representation.values}};
  j["numerics"] = {{"contract", numerics.contract},
                   {"engine_fingerprint", numerics.engine_fingerprint}};
  ordered_json toks = ordered_json::array();
  for (int32_t t : prefix.tokens) toks.push_back(t);
  j["prefix"] = {{"count", prefix.tokens.size()}, {"sha256", prefix.sha256}, {"tokens", toks}};
  j["resume"] = {{"token", resume.token}, {"position", resume.position},
                 {"selection", resume.selection}};
  if (past_context) j["past_context"] = true;  // optional: absent in every other manifest
  auto entry = [](const PayloadEntry& e) {
    return ordered_json{{"file", e.file}, {"bytes", e.bytes}, {"sha256", e.sha256}};
  };
  j["payload"] = {{"keys", entry(keys)}, {"values", entry(values)}};
  return j;
}

namespace {

// Every native field after "format" (the caller has read it), in the written order; the
// caller calls top.done() and validate().
SnapshotManifest read_fields(const nlohmann::json& doc, StrictObject& top, const std::string& where) {
  SnapshotManifest m;
  m.version = int(top.integer("version", 0, INT32_MAX));
  if (m.version != kSnapshotVersion)
    fail_field(where, "version", std::to_string(kSnapshotVersion) + " (this reader)",
               std::to_string(m.version));
  m.producer = top.string("producer", 128);
  {
    StrictObject o = top.object("model");
    m.model.identity = o.string("identity", 128);
    m.model.architecture = o.string("architecture", 64);
    m.model.vocab_size = int(o.integer("vocab_size", 1, kMaxVocab));
    m.model.embedding_size = int(o.integer("embedding_size", 1, 1 << 20));
    m.model.query_heads = int(o.integer("query_heads", 1, kMaxKvHeads * 64));
    o.done();
  }
  {
    StrictObject o = top.object("tokenizer");
    m.tokenizer.identity = o.string("identity", 128);
    o.done();
  }
  {
    StrictObject o = top.object("geometry");
    m.geometry.layers = int(o.integer("layers", 1, kMaxLayers));
    m.geometry.kv_heads = int(o.integer("kv_heads", 1, kMaxKvHeads));
    m.geometry.head_dim = int(o.integer("head_dim", 1, kMaxHeadDim));
    m.geometry.positions = int(o.integer("positions", 1, kMaxPositions));
    o.done();
  }
  {
    StrictObject o = top.object("rope");
    m.rope.layout = o.string("layout", 32);
    m.rope.theta = o.f32("theta");
    StrictObject s = o.object("scaling");
    m.rope.scaling_type = s.string("type", 32);
    m.rope.scaling_factor = s.f32("factor");
    m.rope.original_context = int(s.integer("original_context", 0, INT32_MAX));
    m.rope.low_freq_factor = s.f32("low_freq_factor");
    m.rope.high_freq_factor = s.f32("high_freq_factor");
    s.done();
    o.done();
  }
  {
    StrictObject o = top.object("attention");
    m.attention.qk_norm = o.string("qk_norm", 64);
    m.attention.qkv_bias = o.boolean("qkv_bias");
    o.done();
  }
  {
    StrictObject o = top.object("representation");
    m.representation.dtype = o.string("dtype", 32);
    m.representation.byte_order = o.string("byte_order", 32);
    m.representation.layout = o.string("layout", 64);
    m.representation.keys = o.string("keys", 64);
    m.representation.values = o.string("values", 64);
    o.done();
  }
  {
    StrictObject o = top.object("numerics");
    m.numerics.contract = o.string("contract", 64);
    m.numerics.engine_fingerprint = o.string("engine_fingerprint", 4096);
    o.done();
  }
  {
    StrictObject o = top.object("prefix");
    const int64_t count = o.integer("count", 1, kMaxPositions);
    m.prefix.sha256 = o.string("sha256", 128);
    const nlohmann::json& toks = o.array("tokens");
    if (int64_t(toks.size()) != count)
      fail_field(where, "prefix.tokens", std::to_string(count) + " ids (prefix.count)",
                 std::to_string(toks.size()) + " ids");
    m.prefix.tokens.reserve(toks.size());
    for (size_t i = 0; i < toks.size(); ++i) {
      const auto& t = toks[i];
      if (!t.is_number_integer() || (!t.is_number_unsigned() && t.get<int64_t>() < 0) ||
          t.get<uint64_t>() > uint64_t(INT32_MAX))
        fail_field(where, "prefix.tokens[" + std::to_string(i) + "]", "a token id >= 0", t.dump());
      m.prefix.tokens.push_back(int32_t(t.get<int64_t>()));
    }
    o.done();
  }
  {
    StrictObject o = top.object("resume");
    m.resume.token = int32_t(o.integer("token", 0, INT32_MAX));
    m.resume.position = o.integer("position", 0, INT64_MAX);
    m.resume.selection = o.string("selection", 64);
    o.done();
  }
  if (doc.contains("past_context")) {
    // Optional; its one value is true (a manifest within the context omits the key).
    if (!top.boolean("past_context"))
      fail_field(where, "past_context", "true (or the key absent)", "false");
    m.past_context = true;
  }
  {
    StrictObject o = top.object("payload");
    auto entry = [&](const std::string& key) {
      StrictObject e = o.object(key);
      PayloadEntry p;
      p.file = e.string("file", 64);
      p.bytes = e.unsigned_integer("bytes", UINT64_MAX);
      p.sha256 = e.string("sha256", 128);
      e.done();
      return p;
    };
    m.keys = entry("keys");
    m.values = entry("values");
    o.done();
  }
  return m;
}

// The "mapping" object, strictly; MappedProvenance::validate() checks the values.
MappedProvenance read_provenance(StrictObject o) {
  MappedProvenance p;
  p.kind = o.string("kind", 32);
  // Mapped caches written before the relation label have none: refused by name, not guessed.
  if (!o.has("relation"))
    fail_field(o.where(), "mapping.relation",
               "quantization-boundary, same-base or cross-model (mapped caches written before the relation "
               "label are refused; re-run map apply or map hybrid)",
               "none");
  p.relation = o.string("relation", 32);
  p.mapper_hash = o.string("mapper_hash", 128);
  p.calibration_split_hash = o.string("calibration_split_hash", 128);
  p.shared_layers = int(o.integer("shared_layers", 0, kMaxLayers));
  p.anchor = int(o.integer("anchor", 0, kMaxLayers));
  const nlohmann::json& roles = o.array("layer_roles");
  for (size_t i = 0; i < roles.size(); ++i) {
    const std::string f = "mapping.layer_roles[" + std::to_string(i) + "]";
    if (!roles[i].is_string()) fail_field(o.where(), f, "a string", json_type_name(roles[i]));
    p.layer_roles.push_back(roles[i].get<std::string>());
  }
  p.source_model_identity = o.string("source_model_identity", 128);
  p.source_manifest_sha256 = o.string("source_manifest_sha256", 128);
  p.source_prefix_sha256 = o.string("source_prefix_sha256", 128);
  if (o.has("registration")) p.registration = o.string("registration", 256);
  o.done();
  return p;
}

// The "foreign" object, strictly; ForeignProvenance::validate() checks the values (and that
// "details" holds exactly the members its format's row names).
ForeignProvenance read_foreign(StrictObject o) {
  ForeignProvenance p;
  p.engine = o.string("engine", 32);
  p.format = o.string("format", 32);
  p.format_version = int(o.integer("format_version", 0, INT32_MAX));
  p.cache_type_k = o.string("cache_type_k", 16);
  p.cache_type_v = o.string("cache_type_v", 16);
  p.conversion = o.string("conversion", 32);
  p.resume_source = o.string("resume_source", 32);
  p.source_sha256 = o.string("source_sha256", 128);
  p.source_bytes = o.unsigned_integer("source_bytes", UINT64_MAX);
  StrictObject d = o.object("details");
  for (const char* key : foreign_detail_keys(p.format)) p.details.emplace_back(key, d.string(key, 32));
  d.done();  // a member the format's row does not name is refused here
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
  s.manifest = read_fields(doc, top, where);
  if (format == kMappedFormat) s.provenance = read_provenance(top.object("mapping"));
  if (format == kForeignFormat) s.provenance = read_foreign(top.object("foreign"));
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

ordered_json ForeignProvenance::to_json() const {
  ordered_json d = ordered_json::object();
  for (const auto& [k, v] : details) d[k] = v;
  return {{"engine", engine},
          {"format", format},
          {"format_version", format_version},
          {"cache_type_k", cache_type_k},
          {"cache_type_v", cache_type_v},
          {"conversion", conversion},
          {"resume_source", resume_source},
          {"source_sha256", source_sha256},
          {"source_bytes", source_bytes},
          {"details", d}};
}

std::string ForeignProvenance::detail(const std::string& key) const {
  for (const auto& [k, v] : details)
    if (k == key) return v;
  return "";
}

void ForeignProvenance::validate(const std::string& where) const {
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
    require_one_of(where, field, *v, src->cache_types);
  require_one_of(where, "foreign.conversion", conversion, {"exact", "rounded-to-f16"});
  if ((cache_type_k == "f16" && cache_type_v == "f16") != (conversion == "exact"))
    fail_field(where, "foreign.conversion",
               std::string(cache_type_k == "f16" && cache_type_v == "f16" ? "exact" : "rounded-to-f16") +
                   " (cache types " + cache_type_k + "/" + cache_type_v + ")",
               quote(conversion));
  require_one_of(where, "foreign.resume_source", resume_source, {"argument", "ember-last-prompt-token"});
  require_hex64(where, "foreign.source_sha256", source_sha256);
  if (source_bytes == 0) fail_field(where, "foreign.source_bytes", "> 0", "0");
  const std::vector<const char*> keys = foreign_detail_keys(format);
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

ordered_json MappedProvenance::to_json() const {
  ordered_json j = {{"kind", kind},
          {"relation", relation},
          {"mapper_hash", mapper_hash},
          {"calibration_split_hash", calibration_split_hash},
          {"shared_layers", shared_layers},
          {"anchor", anchor},
          {"layer_roles", layer_roles},
          {"source_model_identity", source_model_identity},
          {"source_manifest_sha256", source_manifest_sha256},
          {"source_prefix_sha256", source_prefix_sha256}};
  if (!registration.empty()) j["registration"] = registration;
  return j;
}

void MappedProvenance::validate(const SnapshotManifest& m, const std::string& where) const {
  require_one_of(where, "mapping.kind", kind, {"identity", "ridge", "affine", "hybrid"});
  require_one_of(where, "mapping.relation", relation, {kRelations[0], kRelations[1], kRelations[2]});
  if (kind != "hybrid" && mapper_hash.empty())
    fail_field(where, "mapping.mapper_hash", "the mapper's hash", "empty");
  if (!mapper_hash.empty()) require_hex64(where, "mapping.mapper_hash", mapper_hash);
  if (!source_manifest_sha256.empty())
    require_hex64(where, "mapping.source_manifest_sha256", source_manifest_sha256);
  require_hex64(where, "mapping.source_model_identity", source_model_identity);
  require_range(where, "mapping.anchor", anchor, shared_layers, m.geometry.layers);
  if (int64_t(layer_roles.size()) != m.geometry.layers)
    fail_field(where, "mapping.layer_roles", std::to_string(m.geometry.layers) + " entries (geometry.layers)",
               std::to_string(layer_roles.size()));
  for (size_t i = 0; i < layer_roles.size(); ++i)
    require_one_of(where, "mapping.layer_roles[" + std::to_string(i) + "]", layer_roles[i],
                   {"reused", "mapped", "recomputed", "kv-projected"});
  if (!registration.empty() && registration != "unregistered" &&
      (registration.rfind("registered ", 0) != 0 || !is_printable_ascii(registration)))
    fail_field(where, "mapping.registration", "unregistered | registered <id> sha256:<hex>", quote(registration));
}

void SnapshotManifest::validate(const std::string& where) const {
  if (format != kSnapshotFormat) fail_field(where, "format", kSnapshotFormat, quote(format));
  if (version != kSnapshotVersion)
    fail_field(where, "version", std::to_string(kSnapshotVersion), std::to_string(version));
  if (!is_printable_ascii(producer)) fail_field(where, "producer", "printable ASCII", quote(producer));
  require_hex64(where, "model.identity", model.identity);
  if (!gguf::find_arch(model.architecture))  // the architecture table (gguf/arch.h)
    fail_field(where, "model.architecture", "one of " + gguf::arch_names("|"), quote(model.architecture));
  require_range(where, "model.vocab_size", model.vocab_size, 1, kMaxVocab);
  require_range(where, "model.embedding_size", model.embedding_size, 1, 1 << 20);
  require_hex64(where, "tokenizer.identity", tokenizer.identity);
  require_range(where, "geometry.layers", geometry.layers, 1, kMaxLayers);
  require_range(where, "geometry.kv_heads", geometry.kv_heads, 1, kMaxKvHeads);
  require_range(where, "geometry.head_dim", geometry.head_dim, 1, kMaxHeadDim);
  require_range(where, "geometry.positions", geometry.positions, 1, kMaxPositions);
  if (geometry.head_dim % 2 != 0)
    fail_field(where, "geometry.head_dim", "an even number (RoPE rotates pairs)",
               std::to_string(geometry.head_dim));
  if (model.query_heads < geometry.kv_heads || model.query_heads % geometry.kv_heads != 0)
    fail_field(where, "model.query_heads",
               "a multiple of geometry.kv_heads (" + std::to_string(geometry.kv_heads) + ")",
               std::to_string(model.query_heads));
  require_one_of(where, "rope.layout", rope.layout, {"normal", "neox"});
  if (!(rope.theta > 0) || !std::isfinite(rope.theta))
    fail_field(where, "rope.theta", "a finite value > 0", f32_text(rope.theta));
  require_one_of(where, "rope.scaling.type", rope.scaling_type, {"none", "linear", "llama3"});
  if (!(rope.scaling_factor > 0) || !std::isfinite(rope.scaling_factor))
    fail_field(where, "rope.scaling.factor", "a finite value > 0", f32_text(rope.scaling_factor));
  require_one_of(where, "attention.qk_norm", attention.qk_norm, {kQkNormNone, kQkNormRmsPerHead});
  require_one_of(where, "representation.dtype", representation.dtype, {"f16"});
  require_one_of(where, "representation.byte_order", representation.byte_order, {"little-endian"});
  require_one_of(where, "representation.layout", representation.layout, {"layer,kv_head,position,dim"});
  require_one_of(where, "representation.keys", representation.keys, {kKeyStatePostRope, kKeyStatePreRope});
  require_one_of(where, "representation.values", representation.values, {kValueStateProjected});
  if (numerics.contract.empty() || !is_printable_ascii(numerics.contract))
    fail_field(where, "numerics.contract", "a non-empty name", quote(numerics.contract));
  if (numerics.engine_fingerprint.empty() || !is_printable_ascii(numerics.engine_fingerprint))
    fail_field(where, "numerics.engine_fingerprint", "a non-empty printable string",
               quote(numerics.engine_fingerprint));
  // The cursor: P prefix tokens at [0, P), the resume token at P.
  if (int64_t(prefix.tokens.size()) != geometry.positions)
    fail_field(where, "prefix.count", std::to_string(geometry.positions) + " (geometry.positions)",
               std::to_string(prefix.tokens.size()));
  for (size_t i = 0; i < prefix.tokens.size(); ++i)
    if (prefix.tokens[i] < 0 || prefix.tokens[i] >= model.vocab_size)
      fail_field(where, "prefix.tokens[" + std::to_string(i) + "]",
                 "an id < vocab_size " + std::to_string(model.vocab_size), std::to_string(prefix.tokens[i]));
  require_hex64(where, "prefix.sha256", prefix.sha256);
  if (const std::string h = prefix_hash(prefix.tokens); h != prefix.sha256)
    fail_field(where, "prefix.sha256", h + " (hash of prefix.tokens)", prefix.sha256);
  if (resume.token < 0 || resume.token >= model.vocab_size)
    fail_field(where, "resume.token", "an id < vocab_size " + std::to_string(model.vocab_size),
               std::to_string(resume.token));
  if (resume.position != geometry.positions)
    fail_field(where, "resume.position", std::to_string(geometry.positions) + " (geometry.positions)",
               std::to_string(resume.position));
  require_one_of(where, "resume.selection", resume.selection, {"greedy-argmax"});
  const uint64_t want = payload_bytes();
  auto check_entry = [&](const PayloadEntry& e, const char* key, const char* file) {
    const std::string f = std::string("payload.") + key;
    if (e.file != file) fail_field(where, f + ".file", file, quote(e.file));
    if (e.bytes != want)
      fail_field(where, f + ".bytes", std::to_string(want) + " (2 * layers * kv_heads * positions * head_dim)",
                 std::to_string(e.bytes));
    require_hex64(where, f + ".sha256", e.sha256);
  };
  check_entry(keys, "keys", kKeysFile);
  check_entry(values, "values", kValuesFile);
}

std::vector<std::pair<std::string, std::string>> SnapshotManifest::target_fields() const {
  return {
      {"model.identity", model.identity},
      {"model.architecture", model.architecture},
      {"tokenizer.identity", tokenizer.identity},
      {"model.vocab_size", std::to_string(model.vocab_size)},
      {"model.embedding_size", std::to_string(model.embedding_size)},
      {"model.query_heads", std::to_string(model.query_heads)},
      {"geometry.layers", std::to_string(geometry.layers)},
      {"geometry.kv_heads", std::to_string(geometry.kv_heads)},
      {"geometry.head_dim", std::to_string(geometry.head_dim)},
      {"rope.layout", rope.layout},
      {"rope.theta", f32_text(rope.theta)},
      {"rope.scaling.type", rope.scaling_type},
      {"rope.scaling.factor", f32_text(rope.scaling_factor)},
      {"rope.scaling.original_context", std::to_string(rope.original_context)},
      {"rope.scaling.low_freq_factor", f32_text(rope.low_freq_factor)},
      {"rope.scaling.high_freq_factor", f32_text(rope.high_freq_factor)},
      {"attention.qk_norm", attention.qk_norm},
      {"attention.qkv_bias", attention.qkv_bias ? "true" : "false"},
      {"representation.dtype", representation.dtype},
      {"representation.keys", representation.keys},
      {"representation.values", representation.values},
      {"numerics.contract", numerics.contract},
      {"numerics.engine_fingerprint", numerics.engine_fingerprint},
  };
}

}  // namespace ember::kv
