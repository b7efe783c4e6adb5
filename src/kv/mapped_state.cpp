#include "kv/mapped_state.h"

#include <cstring>

#include "util/json_strict.h"
#include "util/atomic_file.h"
#include "util/byte_io.h"
#include "util/error.h"
#include "util/mapped_file.h"
#include "util/sha256.h"

namespace ember::kv {
namespace {

void write_rows(const model::KvCache& c, bool keys, ByteSink& out) {
  const size_t row = size_t(c.n_pos) * size_t(c.head_dim) * sizeof(uint16_t);
  for (int l = 0; l < c.n_layers; ++l)
    for (int h = 0; h < c.n_kv_heads; ++h) out.write(keys ? c.k_row(l, h, 0) : c.v_row(l, h, 0), row);
}

std::string hash_rows(const model::KvCache& c, bool keys) {
  HashingSink h;
  write_rows(c, keys, h);
  return to_hex(h.finish());
}

std::string str(const nlohmann::json& j, const char* k, const std::string& where) {
  if (!j.contains(k) || !j[k].is_string())
    fail_field(where, std::string("mapping.") + k, "a string", j.contains(k) ? j[k].dump() : "missing");
  return j[k].get<std::string>();
}

}  // namespace

nlohmann::ordered_json MappedProvenance::to_json() const {
  nlohmann::ordered_json j;
  j["kind"] = kind;
  j["mapper_hash"] = mapper_hash;
  j["calibration_split_hash"] = calibration_split_hash;
  j["shared_layers"] = shared_layers;
  j["anchor"] = anchor;
  j["layer_roles"] = layer_roles;
  j["source_model_identity"] = source_model_identity;
  j["source_manifest_sha256"] = source_manifest_sha256;
  j["source_prefix_sha256"] = source_prefix_sha256;
  return j;
}

MappedProvenance MappedProvenance::from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) fail_field(where, "mapping", "an object", j.type_name());
  MappedProvenance p;
  p.kind = str(j, "kind", where);
  if (p.kind != "identity" && p.kind != "ridge" && p.kind != "affine" && p.kind != "hybrid")
    fail_field(where, "mapping.kind", "identity, ridge, affine or hybrid", p.kind);
  p.mapper_hash = str(j, "mapper_hash", where);
  p.calibration_split_hash = str(j, "calibration_split_hash", where);
  for (const char* k : {"shared_layers", "anchor"})
    if (!j.contains(k) || !j[k].is_number_integer() || j[k].get<int64_t>() < 0 || j[k].get<int64_t>() > kMaxLayers)
      fail_field(where, std::string("mapping.") + k, "an integer in [0, 1024]", j.contains(k) ? j[k].dump() : "missing");
  p.shared_layers = j["shared_layers"].get<int>();
  p.anchor = j["anchor"].get<int>();
  if (p.shared_layers > p.anchor) fail_field(where, "mapping.anchor", ">= shared_layers", std::to_string(p.anchor));
  if (!j.contains("layer_roles") || !j["layer_roles"].is_array())
    fail_field(where, "mapping.layer_roles", "an array", "missing");
  for (const auto& r : j["layer_roles"]) {
    if (!r.is_string()) fail_field(where, "mapping.layer_roles", "strings", r.dump());
    const std::string v = r.get<std::string>();
    if (v != "reused" && v != "mapped" && v != "recomputed" && v != "kv-projected")
      fail_field(where, "mapping.layer_roles", "reused, mapped, recomputed or kv-projected", v);
    p.layer_roles.push_back(v);
  }
  if (p.kind != "hybrid" && p.mapper_hash.empty())
    fail_field(where, "mapping.mapper_hash", "the mapper's hash", "empty");
  p.source_model_identity = str(j, "source_model_identity", where);
  p.source_manifest_sha256 = str(j, "source_manifest_sha256", where);
  p.source_prefix_sha256 = str(j, "source_prefix_sha256", where);
  return p;
}

void write_mapped_state(MappedState& s, const std::string& dir, bool force) {
  model::KvCache& c = s.cache;
  SnapshotManifest& m = s.manifest;
  if (c.n_layers != m.geometry.layers || c.n_kv_heads != m.geometry.kv_heads || c.head_dim != m.geometry.head_dim)
    fail_field(dir, "cache geometry", "the manifest's", "another");
  if (int(s.mapping.layer_roles.size()) != c.n_layers)
    fail_field(dir, "mapping.layer_roles", std::to_string(c.n_layers) + " entries",
               std::to_string(s.mapping.layer_roles.size()));
  m.format = kSnapshotFormat;
  m.geometry.positions = c.n_pos;
  m.prefix.sha256 = prefix_hash(m.prefix.tokens);
  m.keys = {kKeysFile, m.payload_bytes(), hash_rows(c, true)};
  m.values = {kValuesFile, m.payload_bytes(), hash_rows(c, false)};
  m.validate(dir);
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(m.to_json());
  j["format"] = kMappedFormat;
  j["mapping"] = s.mapping.to_json();
  AtomicDirectory out(dir, force);
  for (bool keys : {true, false}) {
    auto f = out.create(keys ? kKeysFile : kValuesFile);
    write_rows(c, keys, f->sink());
    f->commit();
  }
  auto mf = out.create(kManifestFile);
  mf->sink().write(j.dump(2) + "\n");
  mf->commit();
  out.commit();
}

bool is_mapped_state(const std::string& dir) {
  const std::string path = dir + "/" + kManifestFile;
  if (!path_exists(path)) return false;
  try {
    const auto j = ember::parse_json_strict(read_file(path, kMaxManifestBytes), path, 16, kMaxManifestValues);
    return j.is_object() && j.value("format", "") == kMappedFormat;
  } catch (const std::exception&) {
    return false;
  }
}

MappedState read_mapped_state(const std::string& dir) {
  const std::string path = dir + "/" + kManifestFile;
  // The strict parse refuses duplicated keys, deep nesting and an unbounded DOM; the mapping
  // provenance is then read again in its written key order.
  const std::string text = read_file(path, kMaxManifestBytes);
  ember::parse_json_strict(text, path, 16, kMaxManifestValues);
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(text);
  if (!j.is_object() || !j.contains("format") || j["format"] != kMappedFormat)
    fail_field(path, "format", std::string(kMappedFormat) + " (a mapped cache)",
               j.is_object() && j.contains("format") ? j["format"].dump() : "missing");
  if (!j.contains("mapping")) fail_field(path, "mapping", "the mapping provenance", "missing");
  MappedState s;
  s.mapping = MappedProvenance::from_json(nlohmann::json(j["mapping"]), path);
  j.erase("mapping");
  j["format"] = kSnapshotFormat;
  s.manifest = SnapshotManifest::from_json(j.dump(2) + "\n", path);
  const SnapshotManifest& m = s.manifest;
  if (int(s.mapping.layer_roles.size()) != m.geometry.layers)
    fail_field(path, "mapping.layer_roles", std::to_string(m.geometry.layers) + " entries",
               std::to_string(s.mapping.layer_roles.size()));
  if (s.mapping.anchor > m.geometry.layers)
    fail_field(path, "mapping.anchor", "<= layers", std::to_string(s.mapping.anchor));
  const int P = m.geometry.positions;
  s.cache = model::KvCache(m.geometry.layers, m.geometry.kv_heads, m.geometry.head_dim, P);
  s.cache.n_pos = P;
  for (bool keys : {true, false}) {
    const PayloadEntry& e = keys ? m.keys : m.values;
    const std::string p = dir + "/" + (keys ? kKeysFile : kValuesFile);
    const auto mf = MappedFile::open(p);
    if (mf->size() != e.bytes) fail_field(p, "size", std::to_string(e.bytes), std::to_string(mf->size()));
    const std::string found = sha256_hex(mf->data(), mf->size());
    if (found != e.sha256) fail_field(p, "sha256", e.sha256, found);
    std::memcpy(keys ? s.cache.k.data() : s.cache.v.data(), mf->data(), mf->size());
  }
  return s;
}

}  // namespace ember::kv
