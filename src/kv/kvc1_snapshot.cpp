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

json kvc1_state_header(const StateHeader& h) {
  const Kvc1Kind kind = h.mapped() ? Kvc1Kind::mapped : h.is_foreign() ? Kvc1Kind::foreign : Kvc1Kind::native;
  return {{"artifact", {{"kind", kvc1_kind_name(kind)}}},
          {"format", kKvc1Format},
          {"state", json::parse(state_manifest_json(h, "KVC1 state"))}};
}

Digest pack_snapshot_dir(const std::string& dir, const std::string& out, bool force, const std::string& sign_key_pem) {
  // The one directory reader (every check, any kind), then the one KVC1 writer.
  VerifiedState s = read_state_dir(dir, {Accept::any, false});
  if (!sign_key_pem.empty()) s = resign(std::move(s), sign_key_pem);
  return write_state_kvc1(s, out, force);
}

Digest write_state_kvc1(const VerifiedState& v, const std::string& out, bool force) {
  const KvState& s = v.state();
  const SnapshotManifest& m = s.manifest;
  const model::KvCache& c = s.cache;
  const Geometry& g = m.geometry;
  if (c.n_layers != g.layers || c.n_kv_heads != g.kv_heads || c.head_dim != g.head_dim ||
      c.capacity < g.positions || c.n_pos != g.positions)
    fail_field(out, "cache", "a sealed snapshot cache (manifest geometry, n_pos == positions)", "another shape");
  PayloadCheck k_check(m), v_check(m);
  const auto sources = layer_sources(c, &k_check, &v_check);
  AtomicFile file(out, force);
  const Digest d = write_kvc1(file.sink(), kvc1_state_header(s), sources, out);
  // Nothing is committed unless the bytes are those the manifest seals, and finite.
  for (Payload p : {Payload::keys, Payload::values})
    check_payload_stream(p == Payload::keys ? k_check : v_check, (p == Payload::keys ? m.keys : m.values).sha256,
                         out, std::string("state.") + (p == Payload::keys ? "keys" : "values"), "(sealed manifest)",
                         "(cache bytes; a modified cache is not the state its manifest seals)", false);
  file.commit();
  return d;
}

namespace {

StateKind state_kind_of(Kvc1Kind kind) {
  return kind == Kvc1Kind::mapped ? StateKind::mapped : kind == Kvc1Kind::foreign ? StateKind::foreign : StateKind::native;
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

VerifiedState kvc1_to_state(const Kvc1File& f, const ReadOptions& options) {
  const std::string& w = f.path();
  const Accept accept = options.accept;
  if (!accepts(accept, state_kind_of(f.kind())))
    fail_field(w, "artifact.kind",
               std::string(accept == Accept::native   ? "native"
                           : accept == Accept::mapped ? "mapped"
                                                      : "foreign") +
                   " (the state this command reads)",
               "\"" + f.artifact_kind() + "\" (" + who_reads(f.kind()) + ")");
  // ember_kv.torch_gate export writes torch's cache as KVC1 with a state that is no ember
  // manifest (no format, seal or payload hashes; numerics.contract "torch-ref"). Its K/V are
  // another engine's: they come in through the safetensors import and its model check.
  const nlohmann::json& st = f.state();
  if (st.is_object() && !st.contains("format") && st.contains("numerics") && st["numerics"].is_object() &&
      st["numerics"].value("contract", "") == "torch-ref")
    throw Kvc1Error(Kvc1Reject::bad_header,
                    w + ": numerics.contract: expected an ember state, found \"torch-ref\" (a cache "
                        "ember_kv.torch_gate wrote): bring it in as torch's cache with python3 -m "
                        "ember_kv.torch_gate safetensors --kvc " + w + " --output C.safetensors, which prints the "
                        "ember kv import-safetensors line to run");
  StateHeader h;
  try {
    h = parse_state_manifest(f.state().dump(), w + " (KVC1 state)");
  } catch (const Kvc1Error&) {
    throw;
  } catch (const Error& e) {
    throw Kvc1Error(Kvc1Reject::bad_header, std::string(e.what()));
  }
  const char* want_format = f.kind() == Kvc1Kind::mapped    ? kMappedFormat
                            : f.kind() == Kvc1Kind::foreign ? kForeignFormat
                                                            : kSnapshotFormat;
  if (std::string(h.format()) != want_format)
    reject(Kvc1Reject::bad_header, w, "state.format",
           std::string(want_format) + " (artifact.kind \"" + f.artifact_kind() + "\")",
           "\"" + std::string(h.format()) + "\"");
  const Geometry& g = h.manifest.geometry;
  EMBER_CHECK(f.layers() == g.layers);  // the container checked the table against the same state
  // The tensors in table order are K0 V0 K1 V1 ...: the keys source walks the even ones, the
  // values source the odd ones, and read_payloads asks for them in that (file) order.
  const size_t per_layer = size_t(g.kv_heads) * g.positions * g.head_dim * 2;
  std::vector<std::pair<const uint8_t*, size_t>> k, v;
  for (int l = 0; l < g.layers; ++l) {
    k.emplace_back(f.tensor_data(2 * l), per_layer);
    v.emplace_back(f.tensor_data(2 * l + 1), per_layer);
  }
  SpanSource keys(std::move(k), w + " (K payloads)"), values(std::move(v), w + " (V payloads)");
  std::string text = state_manifest_json(h, w);
  PayloadReadOptions ro;
  ro.allow_non_finite = options.allow_non_finite;
  ro.capacity = options.capacity;
  ro.keys_where = w;
  ro.values_where = w;
  ro.found_label = "(the container's payloads)";
  ro.keys_field = "state.keys";
  ro.values_field = "state.values";
  try {
    return read_payloads(std::move(h), std::move(text), keys, values, ro);
  } catch (const Kvc1Error&) {
    throw;
  } catch (const Error& e) {
    // A payload whose bytes are not the sealed ones is the format's state-hash rejection.
    const std::string what = e.what();
    if (what.find(".sha256: expected") != std::string::npos)
      throw Kvc1Error(Kvc1Reject::state_hash_mismatch,
                      w + ": [" + kvc1_reject_name(Kvc1Reject::state_hash_mismatch) + "] " + what.substr(w.size() + 2));
    throw;
  }
}

VerifiedState read_kvc1_state(const std::string& path, const ReadOptions& options) {
  return kvc1_to_state(Kvc1File::open(path), options);
}

void unpack_kvc1(const std::string& path, const std::string& dir, bool force) {
  write_state_dir(read_kvc1_state(path, {Accept::any, false}), dir, force);
}

}  // namespace ember::kv
