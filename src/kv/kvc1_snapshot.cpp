#include "kv/kvc1_snapshot.h"

#include <cstring>

#include "util/atomic_file.h"

namespace ember::kv {

using nlohmann::json;

namespace {

[[noreturn]] void reject(Kvc1Reject code, const std::string& where, const std::string& field,
                         const std::string& expected, const std::string& found) {
  throw Kvc1Error(code, where + ": [" + kvc1_reject_name(code) + "] " + field + ": expected " +
                            expected + ", found " + found);
}

// Forwards to a sink and, when `check` is set, to the whole-payload check of its kind.
class TeeSink final : public ByteSink {
 public:
  TeeSink(ByteSink& out, PayloadCheck* check) : out_(out), check_(check) {}
  void write(const void* data, size_t n) override {
    out_.write(data, n);
    if (check_) check_->write(data, n);
    n_bytes_ += n;
  }
  using ByteSink::write;

 private:
  ByteSink& out_;
  PayloadCheck* check_;
};

// One KVC1 tensor per (layer, K|V), each emitted by the payload serializer over that layer:
// K (V) of layers 0..L-1 concatenated are the bytes of keys.f16le (values.f16le). The first
// emission of each tensor (write_kvc1's hash pass, in table order) also feeds the
// whole-payload check of its kind, so those checks see each payload once, in layer order.
std::vector<Kvc1TensorSource> layer_sources(const model::KvCache& c, PayloadCheck* k_check,
                                            PayloadCheck* v_check) {
  std::vector<Kvc1TensorSource> out;
  for (int l = 0; l < c.n_layers; ++l) {
    for (Payload p : {Payload::keys, Payload::values}) {
      Kvc1TensorSource t;
      t.layer = uint32_t(l);
      t.is_value = p == Payload::values;
      t.dtype = Kvc1Dtype::f16;
      t.shape[0] = uint64_t(c.n_kv_heads);
      t.shape[1] = uint64_t(c.n_pos);
      t.shape[2] = uint64_t(c.head_dim);
      PayloadCheck* whole = p == Payload::keys ? k_check : v_check;
      auto first = std::make_shared<bool>(true);
      t.emit = [&c, p, l, whole, first](ByteSink& s) {
        TeeSink tee(s, *first ? whole : nullptr);
        write_payload(c, p, tee, l, l + 1);
        *first = false;
      };
      out.push_back(std::move(t));
    }
  }
  return out;
}

}  // namespace

json kvc1_state_header(const SnapshotManifest& m, const MappedProvenance* mapping, const ForeignProvenance* foreign) {
  const Kvc1Kind kind = mapping ? Kvc1Kind::mapped : foreign ? Kvc1Kind::foreign : Kvc1Kind::native;
  return {{"artifact", {{"kind", kvc1_kind_name(kind)}}},
          {"format", kKvc1Format},
          {"state", json::parse(state_manifest_json(m, mapping, "KVC1 state", foreign))}};
}

Digest pack_snapshot_dir(const std::string& dir, const std::string& out, bool force, const std::string& sign_key_pem) {
  // The one directory reader (every check, either kind), then the one KVC1 writer.
  StateDir d = read_state_dir(dir, {Accept::any, false});
  if (!sign_key_pem.empty())
    sign_manifest(d.header.manifest, d.header.mapping ? &*d.header.mapping : nullptr, sign_key_pem,
                  d.header.foreign ? &*d.header.foreign : nullptr);
  return write_state_kvc1(d.header.manifest, d.header.mapping ? &*d.header.mapping : nullptr, d.cache, out, force,
                          d.header.foreign ? &*d.header.foreign : nullptr);
}

Digest write_state_kvc1(const SnapshotManifest& m, const MappedProvenance* mapping, const model::KvCache& c,
                        const std::string& out, bool force, const ForeignProvenance* foreign) {
  const Geometry& g = m.geometry;
  if (c.n_layers != g.layers || c.n_kv_heads != g.kv_heads || c.head_dim != g.head_dim ||
      c.capacity < g.positions || c.n_pos != g.positions)
    fail_field(out, "cache", "a sealed snapshot cache (manifest geometry, n_pos == positions)", "another shape");
  PayloadCheck k_check(g), v_check(g);
  const auto sources = layer_sources(c, &k_check, &v_check);
  AtomicFile file(out, force);
  const Digest d = write_kvc1(file.sink(), kvc1_state_header(m, mapping, foreign), sources, out);
  // Nothing is committed unless the bytes are those the manifest seals, and finite.
  for (Payload p : {Payload::keys, Payload::values})
    check_payload_stream(p == Payload::keys ? k_check : v_check, (p == Payload::keys ? m.keys : m.values).sha256,
                         out, std::string("state.") + (p == Payload::keys ? "keys" : "values"), "(sealed manifest)",
                         "(cache bytes; a modified cache is not the state its manifest seals)", false);
  file.commit();
  return d;
}

namespace {

bool accepts(Accept accept, Kvc1Kind kind) {
  switch (accept) {
    case Accept::native: return kind == Kvc1Kind::native;
    case Accept::mapped: return kind == Kvc1Kind::mapped;
    case Accept::foreign: return kind == Kvc1Kind::foreign;
    case Accept::any: return true;
  }
  return false;
}

const char* who_reads(Kvc1Kind kind) {
  switch (kind) {
    case Kvc1Kind::native: return "a native snapshot: kv replay reads it";
    case Kvc1Kind::mapped: return "a mapped cache: ember map replay and kv compare read it";
    case Kvc1Kind::foreign: return "another engine's cache: kv compare reads it, kv replay only with --allow-foreign";
  }
  return "?";
}

}  // namespace

StateDir kvc1_to_state(const Kvc1File& f, Accept accept, bool allow_non_finite) {
  const std::string& w = f.path();
  if (!accepts(accept, f.kind()))
    fail_field(w, "artifact.kind",
               std::string(accept == Accept::native   ? "native"
                           : accept == Accept::mapped ? "mapped"
                                                      : "foreign") +
                   " (the state this command reads)",
               "\"" + f.artifact_kind() + "\" (" + who_reads(f.kind()) + ")");
  StateDir s;
  try {
    s.header = parse_state_manifest(f.state().dump(), w + " (KVC1 state)");
  } catch (const Kvc1Error&) {
    throw;
  } catch (const Error& e) {
    throw Kvc1Error(Kvc1Reject::bad_header, std::string(e.what()));
  }
  const char* want_format = f.kind() == Kvc1Kind::mapped    ? kMappedFormat
                            : f.kind() == Kvc1Kind::foreign ? kForeignFormat
                                                            : kSnapshotFormat;
  if (std::string(s.header.format()) != want_format)
    reject(Kvc1Reject::bad_header, w, "state.format",
           std::string(want_format) + " (artifact.kind \"" + f.artifact_kind() + "\")",
           "\"" + std::string(s.header.format()) + "\"");
  const SnapshotManifest& m = s.header.manifest;
  const Geometry& g = m.geometry;
  EMBER_CHECK(f.layers() == g.layers);  // the container checked the table against the same state
  s.cache = model::KvCache(g.layers, g.kv_heads, g.head_dim, g.positions);
  s.cache.n_pos = g.positions;
  const size_t per_layer = size_t(g.kv_heads) * g.positions * g.head_dim;
  for (int l = 0; l < g.layers; ++l) {
    std::memcpy(s.cache.k.data() + per_layer * l, f.tensor_data(2 * l), per_layer * 2);
    std::memcpy(s.cache.v.data() + per_layer * l, f.tensor_data(2 * l + 1), per_layer * 2);
  }
  // The state hashes over the payload serializer's bytes (K, V tensors in layer order), then
  // finiteness: the checks read_state_dir makes on keys.f16le / values.f16le.
  for (Payload p : {Payload::keys, Payload::values}) {
    const bool k = p == Payload::keys;
    PayloadCheck chk(g);
    write_payload(s.cache, p, chk);
    const std::string got = chk.sha256(), field = std::string("state.") + (k ? "keys" : "values");
    const std::string& want = (k ? m.keys : m.values).sha256;
    if (got != want)
      reject(Kvc1Reject::state_hash_mismatch, w, field + ".sha256", want, got + (k ? " (K payloads)" : " (V payloads)"));
    if (!allow_non_finite && !chk.first_non_finite().empty())
      fail_field(w, std::string(k ? "K" : "V") + " payloads", "finite f16 values (exponent bits not all ones)",
                 chk.first_non_finite());
  }
  s.manifest_text = state_manifest_json(m, s.header.mapping ? &*s.header.mapping : nullptr, w,
                                        s.header.foreign ? &*s.header.foreign : nullptr);
  return s;
}

StateDir read_kvc1_state(const std::string& path, Accept accept, bool allow_non_finite) {
  return kvc1_to_state(Kvc1File::open(path), accept, allow_non_finite);
}

Snapshot kvc1_to_snapshot(const Kvc1File& f, bool allow_non_finite) {
  StateDir d = kvc1_to_state(f, Accept::native, allow_non_finite);
  return {std::move(d.header.manifest), std::move(d.cache)};
}

Snapshot read_kvc1_snapshot(const std::string& path, bool allow_non_finite) {
  return kvc1_to_snapshot(Kvc1File::open(path), allow_non_finite);
}

void unpack_kvc1(const std::string& path, const std::string& dir, bool force) {
  const StateDir d = read_kvc1_state(path, Accept::any);
  write_state_dir(d.header.manifest, d.header.mapping ? &*d.header.mapping : nullptr, d.cache, dir, force,
                  d.header.foreign ? &*d.header.foreign : nullptr);
}

}  // namespace ember::kv
