#include "analysis/compare_load.h"

#include <cstdio>
#include <cstring>
#include <optional>

#include "kv/manifest_fields.h"
#include "kv/state.h"
#include "util/error.h"
#include "util/sha256.h"

namespace ember::analysis {

namespace {

std::string exact_float(float f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", double(f));  // round-trips every f32
  return buf;
}

}  // namespace

NamedValues representation_of(const kv::SnapshotManifest& m) {
  NamedValues out;
  kv::visit_fields(m, [&](const auto& v, const kv::FieldSpec& f) {
    using T = std::decay_t<decltype(v)>;
    if (!(f.roles & kv::kRepresentation)) return;
    std::string name = f.path;
    if (name.rfind("representation.", 0) == 0) name.erase(0, std::strlen("representation."));
    if constexpr (std::is_same_v<T, std::string>)
      out.emplace_back(name, v);
    else if constexpr (std::is_same_v<T, float>)
      out.emplace_back(name, exact_float(v));
    else if constexpr (std::is_same_v<T, int>)
      out.emplace_back(name, std::to_string(v));
    else
      EMBER_CHECK(!"a representation field is a string, an f32 or an int");
  });
  return out;
}

std::string weights_of_fingerprint(const std::string& fp) {
  const std::string key = "weights=";
  size_t at = fp.find(key);
  if (at == std::string::npos) return "";
  at += key.size();
  const size_t end = fp.find(';', at);
  return fp.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

namespace {

// Everything but snapshot_id (which depends on the artifact kind's manifest text).
ComparedState compared_fields(kv::KvState s) {
  const kv::SnapshotManifest& m = s.manifest;
  ComparedState c;
  c.identity.kind = "native";
  c.identity.model_identity = m.model.identity;
  c.identity.architecture = m.model.architecture;
  c.identity.engine_fingerprint = m.numerics.engine_fingerprint;
  c.identity.weights = weights_of_fingerprint(m.numerics.engine_fingerprint);
  c.identity.keys_sha256 = m.keys.sha256;
  c.identity.values_sha256 = m.values.sha256;
  c.identity.seal = m.seal;
  c.identity.signature = m.signature;
  c.identity.provenance = {{"format", std::string(m.format) + ".v" + std::to_string(m.version)},
                           {"numerics_contract", m.numerics.contract}};
  c.coords.n_layers = m.geometry.layers;
  c.coords.n_kv_heads = m.geometry.kv_heads;
  c.coords.head_dim = m.geometry.head_dim;
  c.coords.n_pos = m.geometry.positions;
  c.coords.prefix_tokens = m.prefix.tokens;
  c.coords.tokenizer_identity = m.tokenizer.identity;
  c.coords.resume_token = m.resume.token;
  c.coords.representation = representation_of(m);
  c.cache = std::move(s.cache);
  return c;
}

}  // namespace

ComparedState compared_from_state(kv::VerifiedState v) {
  const std::string manifest_sha = sha256_hex(v.manifest_text());
  kv::KvState s = std::move(v).release();
  const kv::Provenance provenance = s.provenance;
  ComparedState c = compared_fields(std::move(s));
  c.identity.snapshot_id = manifest_sha;
  if (const kv::ForeignProvenance* f = std::get_if<kv::ForeignProvenance>(&provenance)) {
    // Another engine's cache of the same model: keys post-RoPE in the model's RoPE layout in
    // every source ember imports, so nothing is converted here.
    c.identity.kind = "foreign";
    c.identity.provenance = {{"format", std::string(kv::kForeignFormat) + ".v1"},
                             {"foreign.engine", f->engine},
                             {"foreign.format", f->format + " v" + std::to_string(f->format_version)},
                             {"foreign.cache_type_k", f->cache_type_k},
                             {"foreign.cache_type_v", f->cache_type_v}};
    for (const auto& [k, val] : f->details) c.identity.provenance.push_back({"foreign." + k, val});
    c.identity.provenance.push_back({"foreign.conversion", f->conversion});
    c.identity.provenance.push_back({"foreign.resume_source", f->resume_source});
    c.identity.provenance.push_back({"foreign.source_sha256", f->source_sha256});
    c.identity.provenance.push_back(
        {"key_convention", f->format == "ggsq"
                               ? "post-rope in both engines, same RoPE layout; llama.cpp's Hadamard rotation of "
                                 "quantized K/V (k_rotation, v_rotation) undone on import"
                               : "post-rope in both engines; Hugging Face's rotate-half key order converted to the "
                                 "model's RoPE layout on import"});
    return c;
  }
  const kv::MappedProvenance* p = std::get_if<kv::MappedProvenance>(&provenance);
  if (!p) return c;
  c.identity.kind = "mapped";
  c.identity.provenance = {{"format", std::string(kv::kMappedFormat) + ".v1"},
                           {"numerics_contract", c.identity.provenance.back().second},
                           {"mapping.kind", p->kind},
                           {"mapping.mapper_hash", p->mapper_hash},
                           {"mapping.shared_layers", std::to_string(p->shared_layers)},
                           {"mapping.anchor", std::to_string(p->anchor)},
                           {"mapping.source_model_identity", p->source_model_identity},
                           {"mapping.source_manifest_sha256", p->source_manifest_sha256}};
  return c;
}

}  // namespace ember::analysis
