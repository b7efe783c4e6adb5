#include "kv/kvc1_snapshot.h"

#include <cstring>

#include "util/atomic_file.h"
#include "util/mapped_file.h"

namespace ember::kv {

using nlohmann::json;

namespace {

[[noreturn]] void reject(Kvc1Reject code, const std::string& where, const std::string& field,
                         const std::string& expected, const std::string& found) {
  throw Kvc1Error(code, where + ": [" + kvc1_reject_name(code) + "] " + field + ": expected " +
                            expected + ", found " + found);
}

// Per-layer sources over two f16 arrays laid out [layer][kv_head][stride][head_dim] where
// positions [0, P) of each head are valid (stride = P for payload files, the cache capacity
// for an in-memory cache). The first emission of each tensor also feeds the whole-payload
// hashers (K and V in layer order: the bytes of keys.f16le / values.f16le).
std::vector<Kvc1TensorSource> layer_sources(const Geometry& g, int stride, const uint8_t* keys,
                                            const uint8_t* values, Sha256* k_hash, Sha256* v_hash) {
  const uint64_t seg = uint64_t(g.positions) * g.head_dim * 2;     // one head's valid rows
  const uint64_t head_stride = uint64_t(stride) * g.head_dim * 2;  // distance between heads
  std::vector<Kvc1TensorSource> out;
  for (int l = 0; l < g.layers; ++l) {
    for (int kind = 0; kind < 2; ++kind) {
      Kvc1TensorSource t;
      t.layer = uint32_t(l);
      t.is_value = kind == 1;
      t.dtype = Kvc1Dtype::f16;
      t.shape[0] = uint64_t(g.kv_heads);
      t.shape[1] = uint64_t(g.positions);
      t.shape[2] = uint64_t(g.head_dim);
      const uint8_t* base = (kind ? values : keys) + head_stride * uint64_t(g.kv_heads) * uint64_t(l);
      Sha256* whole = kind ? v_hash : k_hash;
      auto first = std::make_shared<bool>(true);
      const int heads = g.kv_heads;
      t.emit = [base, seg, head_stride, heads, whole, first](ByteSink& s) {
        for (int h = 0; h < heads; ++h) {
          const uint8_t* p = base + head_stride * uint64_t(h);
          s.write(p, seg);
          if (*first && whole) whole->update(p, seg);
        }
        *first = false;
      };
      out.push_back(std::move(t));
    }
  }
  return out;
}

}  // namespace

json kvc1_native_header(const SnapshotManifest& m) {
  return {{"artifact", {{"kind", "native"}}},
          {"format", kKvc1Format},
          {"state", json::parse(m.to_json())}};
}

Digest pack_snapshot_dir(const std::string& dir, const std::string& out, bool force) {
  const SnapshotManifest m = read_manifest(dir);  // strict and internally consistent
  const auto keys = MappedFile::open(dir + "/" + kKeysFile);
  const auto values = MappedFile::open(dir + "/" + kValuesFile);
  if (keys->size() != m.keys.bytes)
    fail_field(keys->path(), "size", std::to_string(m.keys.bytes) + " bytes (manifest)", std::to_string(keys->size()));
  if (values->size() != m.values.bytes)
    fail_field(values->path(), "size", std::to_string(m.values.bytes) + " bytes (manifest)", std::to_string(values->size()));
  Sha256 k_hash, v_hash;
  const auto sources = layer_sources(m.geometry, m.geometry.positions, keys->data(), values->data(), &k_hash, &v_hash);
  AtomicFile file(out, force);
  const Digest d = write_kvc1(file.sink(), kvc1_native_header(m), sources, out);
  const std::string k_hex = to_hex(k_hash.finish()), v_hex = to_hex(v_hash.finish());
  if (k_hex != m.keys.sha256) fail_field(keys->path(), "sha256", m.keys.sha256 + " (manifest)", k_hex);
  if (v_hex != m.values.sha256) fail_field(values->path(), "sha256", m.values.sha256 + " (manifest)", v_hex);
  file.commit();
  return d;
}

Digest write_snapshot_kvc1(const Snapshot& s, const std::string& out, bool force) {
  const Geometry& g = s.manifest.geometry;
  const model::KvCache& c = s.cache;
  if (c.n_layers != g.layers || c.n_kv_heads != g.kv_heads || c.head_dim != g.head_dim ||
      c.capacity < g.positions || c.n_pos != g.positions)
    fail_field(out, "cache", "a sealed snapshot cache (manifest geometry, n_pos == positions)", "another shape");
  Sha256 k_hash, v_hash;
  const auto sources = layer_sources(g, c.capacity, reinterpret_cast<const uint8_t*>(c.k.data()),
                                     reinterpret_cast<const uint8_t*>(c.v.data()), &k_hash, &v_hash);
  AtomicFile file(out, force);
  const Digest d = write_kvc1(file.sink(), kvc1_native_header(s.manifest), sources, out);
  const std::string k_hex = to_hex(k_hash.finish()), v_hex = to_hex(v_hash.finish());
  if (k_hex != s.manifest.keys.sha256 || v_hex != s.manifest.values.sha256)
    fail_field(out, "cache", "the bytes the manifest was sealed with", "a modified cache");
  file.commit();
  return d;
}

Snapshot kvc1_to_snapshot(const Kvc1File& f) {
  const std::string& w = f.path();
  if (f.artifact_kind() != "native")
    reject(Kvc1Reject::bad_header, w, "artifact.kind", "native (a mapped cache is never loaded as a native snapshot)",
           "\"" + f.artifact_kind() + "\"");
  Snapshot s;
  try {
    s.manifest = SnapshotManifest::from_json(f.state().dump(), w + " (KVC1 state)");
  } catch (const Kvc1Error&) {
    throw;
  } catch (const Error& e) {
    throw Kvc1Error(Kvc1Reject::bad_header, std::string(e.what()));
  }
  const Geometry& g = s.manifest.geometry;
  EMBER_CHECK(f.layers() == g.layers);  // the container checked the table against the same state
  s.cache = model::KvCache(g.layers, g.kv_heads, g.head_dim, g.positions);
  s.cache.n_pos = g.positions;
  const size_t per_layer = size_t(g.kv_heads) * g.positions * g.head_dim;
  Sha256 k_hash, v_hash;
  for (int l = 0; l < g.layers; ++l) {
    std::memcpy(s.cache.k.data() + per_layer * l, f.tensor_data(2 * l), per_layer * 2);
    std::memcpy(s.cache.v.data() + per_layer * l, f.tensor_data(2 * l + 1), per_layer * 2);
    k_hash.update(f.tensor_data(2 * l), per_layer * 2);
    v_hash.update(f.tensor_data(2 * l + 1), per_layer * 2);
  }
  const std::string k_hex = to_hex(k_hash.finish()), v_hex = to_hex(v_hash.finish());
  if (k_hex != s.manifest.keys.sha256)
    reject(Kvc1Reject::state_hash_mismatch, w, "state.keys.sha256", s.manifest.keys.sha256, k_hex + " (K payloads)");
  if (v_hex != s.manifest.values.sha256)
    reject(Kvc1Reject::state_hash_mismatch, w, "state.values.sha256", s.manifest.values.sha256, v_hex + " (V payloads)");
  // The reader of a verified file seals the state; sealing must reproduce the manifest.
  const std::string before = s.manifest.to_json();
  seal(s);
  if (s.manifest.to_json() != before)
    reject(Kvc1Reject::state_hash_mismatch, w, "state", "a manifest that its payloads reproduce", "a different one");
  return s;
}

Snapshot read_kvc1_snapshot(const std::string& path) { return kvc1_to_snapshot(Kvc1File::open(path)); }

void unpack_kvc1(const std::string& path, const std::string& dir, bool force) {
  write_snapshot(read_kvc1_snapshot(path), dir, force);
}

}  // namespace ember::kv
