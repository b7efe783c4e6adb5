#pragma once
// Hand-built snapshots for the format tests (no model needed).
#include <cstdint>
#include <fstream>
#include <functional>
#include <random>
#include <string>

#include "kv/seal.h"
#include "kv/state.h"
#include "kv/strict_json.h"
#include "util/f16.h"
#include "util/sha256.h"

namespace ember::test {

// A native state of the given geometry with deterministic pseudo-random f16 contents, not yet
// sealed (make_snapshot seals it). The cache has `capacity` >= positions (unused capacity
// holds a poison pattern that must never reach a payload).
inline kv::KvState make_state(int layers, int kv_heads, int head_dim, int positions, uint32_t seed = 1,
                              int capacity = 0) {
  kv::KvState s;
  kv::SnapshotManifest& m = s.manifest;
  m.producer = "ember test";
  m.model.identity = sha256_hex("model-" + std::to_string(seed));
  m.model.architecture = "qwen2";
  m.model.vocab_size = 512;
  m.model.embedding_size = kv_heads * head_dim * 2;
  m.model.query_heads = kv_heads * 2;
  m.tokenizer.identity = sha256_hex("tokenizer");
  m.geometry = {layers, kv_heads, head_dim, positions};
  m.rope.layout = "neox";
  m.rope.theta = 1000000.0f;
  m.attention.qk_norm = kv::kQkNormNone;
  m.attention.qkv_bias = true;
  m.numerics.contract = "canonical-v1";
  m.numerics.engine_fingerprint = "canonical-v1;weights=q8_0;test";
  std::mt19937 rng(seed);
  for (int i = 0; i < positions; ++i) m.prefix.tokens.push_back(int32_t(rng() % 512));
  m.resume.token = int32_t(rng() % 512);
  m.resume.position = positions;
  const int cap = capacity > positions ? capacity : positions;
  s.cache = model::KvCache(layers, kv_heads, head_dim, cap);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto& x : s.cache.k) x = 0x7e00;  // NaN poison in unused capacity
  for (auto& x : s.cache.v) x = 0x7e00;
  for (int l = 0; l < layers; ++l)
    for (int h = 0; h < kv_heads; ++h)
      for (int p = 0; p < positions; ++p)
        for (int d = 0; d < head_dim; ++d) {
          s.cache.k_row(l, h, p)[d] = f32_to_f16(nd(rng));
          s.cache.v_row(l, h, p)[d] = f32_to_f16(nd(rng));
        }
  s.cache.n_pos = positions;
  s.manifest.prefix.sha256 = kv::prefix_hash(s.manifest.prefix.tokens);
  return s;
}

// make_state, sealed.
inline kv::VerifiedState make_snapshot(int layers, int kv_heads, int head_dim, int positions, uint32_t seed = 1,
                                       int capacity = 0) {
  return kv::seal(make_state(layers, kv_heads, head_dim, positions, seed, capacity), "test snapshot");
}

// The mapping of make_mapped_state (ridge provenance, first layer reused).
inline kv::MappedProvenance test_mapping(int layers, const std::string& prefix_sha256) {
  kv::MappedProvenance m;
  m.kind = "ridge";
  m.relation = "quantization-boundary";
  m.mapper_hash = sha256_hex("mapper");
  m.calibration_split_hash = sha256_hex("split");
  m.shared_layers = 1;
  m.anchor = layers;
  m.layer_roles.assign(size_t(layers), "mapped");
  m.layer_roles[0] = "reused";
  m.source_model_identity = sha256_hex("source model");
  m.source_manifest_sha256 = sha256_hex("source manifest");
  m.source_prefix_sha256 = prefix_sha256;
  return m;
}

// A mapped state over make_state's cache, not yet sealed (kv::seal, then kv::write_state_dir).
inline kv::KvState make_mapped_state(int layers, int kv_heads, int head_dim, int positions, uint32_t seed = 3) {
  kv::KvState s = make_state(layers, kv_heads, head_dim, positions, seed);
  s.provenance = test_mapping(layers, s.manifest.prefix.sha256);
  return s;
}

// Seals and writes a state (the one directory writer).
inline void write_state(kv::KvState s, const std::string& dir, bool force = false) {
  kv::write_state_dir(kv::seal(std::move(s), dir), dir, force);
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void spit(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

// Edits DIR/manifest.json as JSON (key order kept) and writes it back in ember's layout. With
// reseal (the default) the "seal" member is recomputed over the edited document, so that only
// the rule the edit breaks can be what a reader refuses; reseal = false leaves the old seal, as
// a naive editor would.
inline void edit_manifest(const std::string& dir, const std::function<void(kv::ordered_json&)>& fn,
                          bool reseal = true) {
  const std::string path = dir + "/manifest.json";
  std::ifstream in(path, std::ios::binary);
  kv::ordered_json j = kv::ordered_json::parse(std::string(std::istreambuf_iterator<char>(in), {}));
  fn(j);
  if (reseal && j.contains(kv::kSealKey)) j[kv::kSealKey] = kv::manifest_seal(nlohmann::json(j));
  std::ofstream(path, std::ios::binary | std::ios::trunc) << kv::pretty_json(j);
}

// Recomputes the manifest's payload hashes (and, for version 2, its proof blocks) from the
// payload files as they are, and reseals: a forger's edit, so that only a rule the hashes
// cannot see is left to refuse the directory.
inline void rehash_payloads(const std::string& dir) {
  edit_manifest(dir, [&](auto& j) {
    kv::SnapshotManifest m;
    m.version = j["version"].template get<int>();
    m.geometry = {j["geometry"]["layers"].template get<int>(), j["geometry"]["kv_heads"].template get<int>(),
                  j["geometry"]["head_dim"].template get<int>(), j["geometry"]["positions"].template get<int>()};
    kv::PayloadCheck k(m), v(m);
    k.write(::ember::test::slurp(dir + "/keys.f16le"));
    v.write(::ember::test::slurp(dir + "/values.f16le"));
    j["payload"]["keys"]["sha256"] = k.sha256();
    j["payload"]["values"]["sha256"] = v.sha256();
    if (m.version >= 2) j["proof"]["blocks"] = kv::proof_blocks(k, v);
  });
}

}  // namespace ember::test
