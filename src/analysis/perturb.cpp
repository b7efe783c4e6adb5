#include "analysis/perturb.h"

#include <cmath>
#include <cstdio>
#include <vector>
#include <nlohmann/json.hpp>

#include "analysis/kv_quantize.h"
#include "gguf/quantize.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/f16.h"
#include "util/sha256.h"

namespace ember::analysis {

namespace {

using ojson = nlohmann::ordered_json;
constexpr const char* kReceiptFormat = "ember.kv-perturbation-receipt";
constexpr int kReceiptVersion = 1;
// What gguf::quantize_row_kv_cache reproduces: the encoder of llama.cpp's CPU backend on x86.
constexpr const char* kQuantEncoder = "ggml-cpu-x86 from_float (q8_0 AVX2, others the reference)";

bool has_k(PerturbPart p) { return p != PerturbPart::v; }
bool has_v(PerturbPart p) { return p != PerturbPart::k; }

std::string hex32(uint32_t x) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", x);
  return buf;
}

std::string a_number(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", double(v));
  return buf;
}

inline uint16_t perturb_one(uint16_t h, const PerturbSpec& s) {
  if (s.zero) return 0;
  if ((h & 0x7c00u) == 0x7c00u) return h;  // NaN/Inf kept bit for bit
  return f32_to_f16(f16_to_f32(h) * bits_to_f32(s.scale_bits));
}

// The selected rows of one part: positions [0, n_pos) of (layer, head), contiguous.
size_t selected_count(const model::KvCache& c) { return size_t(c.n_pos) * size_t(c.head_dim); }

uint64_t count_changes(const model::KvCache& c, bool keys, const PerturbSpec& s) {
  const uint16_t* row = keys ? c.k_row(s.layer, s.head, 0) : c.v_row(s.layer, s.head, 0);
  uint64_t changed = 0;
  for (size_t i = 0, n = selected_count(c); i < n; ++i) changed += perturb_one(row[i], s) != row[i];
  return changed;
}

// A perturbed cache is a cache: like every cache ember writes or reads, its K/V must be finite
// (docs/reliability.md), and `kv compare --allow-non-finite` is the only opt-in. A scale can
// overflow f16 (|x| > 65504 becomes inf: `--scale 65536` on any |x| >= 1), so the result is
// checked, not the factor alone. Error naming `where`, the first non-finite element and `why`.
void refuse_non_finite(const model::KvCache& c, const std::string& where, const std::string& why) {
  for (int part = 0; part < 2; ++part)
    for (int l = 0; l < c.n_layers; ++l)
      for (int h = 0; h < c.n_kv_heads; ++h)
        for (int p = 0; p < c.n_pos; ++p) {
          const uint16_t* row = part == 0 ? c.k_row(l, h, p) : c.v_row(l, h, p);
          for (int d = 0; d < c.head_dim; ++d)
            if ((row[d] & 0x7c00u) == 0x7c00u)
              fail_field(where,
                         std::string(part == 0 ? "K" : "V") + " layer " + std::to_string(l) + " kv_head " +
                             std::to_string(h) + " position " + std::to_string(p) + " dim " + std::to_string(d),
                         "finite after the perturbation", std::string(row[d] & 0x3ffu ? "nan" : "inf") + why);
        }
}

uint64_t apply_rows(model::KvCache& c, bool keys, const PerturbSpec& s) {
  uint16_t* row = keys ? c.k_row(s.layer, s.head, 0) : c.v_row(s.layer, s.head, 0);
  uint64_t changed = 0;
  for (size_t i = 0, n = selected_count(c); i < n; ++i) {
    const uint16_t out = perturb_one(row[i], s);
    changed += out != row[i];
    row[i] = out;
  }
  return changed;
}

std::string layers_text(const std::vector<int>& layers) {
  std::string out;
  for (int l : layers) out += (out.empty() ? "" : ",") + std::to_string(l);
  return out;
}

// The selected layers of a quantize spec: ascending, distinct, inside the geometry.
std::vector<int> checked_layers(const std::vector<int>& layers, int n_layers, const char* where) {
  std::vector<int> out = layers;
  if (out.empty())
    for (int l = 0; l < n_layers; ++l) out.push_back(l);
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] < 0 || out[i] >= n_layers)
      fail_field(where, "--layers", "layers in 0.." + std::to_string(n_layers - 1),
                 layers_text(out));
    if (i > 0 && out[i] <= out[i - 1])
      fail_field(where, "--layers", "ascending, distinct layers", layers_text(out));
  }
  return out;
}

struct QuantizeCount {
  uint64_t k = 0, v = 0;
};

QuantizeCount quantize_selected(model::KvCache& c, const PerturbSpec& s, bool write) {
  QuantizeCount n;
  for (int l : s.layers) {
    if (has_k(s.part))
      n.k += quantize_kv_rows(c, KvPart::k, *s.quantize, s.rotation, l, 0, c.n_pos, write);
    if (has_v(s.part))
      n.v += quantize_kv_rows(c, KvPart::v, *s.quantize, s.rotation, l, 0, c.n_pos, write);
  }
  return n;
}

// What every perturbation receipt binds: the source state (its identity and active K/V
// hashes), its shape, and the spec as given.
PerturbReceipt receipt_for(const ComparedState& source, const PerturbSpec& spec) {
  const StateCoordinates& x = source.coords;
  PerturbReceipt r;
  r.source_snapshot_id = source.identity.snapshot_id;
  r.source_keys_sha256 = active_keys_sha256(source.cache);
  r.source_values_sha256 = active_values_sha256(source.cache);
  r.source_model_identity = source.identity.model_identity;
  r.n_layers = x.n_layers;
  r.n_kv_heads = x.n_kv_heads;
  r.head_dim = x.head_dim;
  r.n_pos = x.n_pos;
  r.spec = spec;
  return r;
}

PerturbReceipt make_quantize_receipt(const ComparedState& source, const PerturbSpec& spec) {
  const StateCoordinates& x = source.coords;
  check_kv_quantizable(*spec.quantize, x.n_kv_heads, x.head_dim, "kv perturb");
  PerturbReceipt r = receipt_for(source, spec);
  r.spec.layer = 0;
  r.spec.head = 0;
  r.spec.zero = false;
  r.spec.scale_bits = 0;
  r.spec.layers = checked_layers(spec.layers, x.n_layers, "kv perturb");
  const uint64_t per_part = uint64_t(r.spec.layers.size()) * uint64_t(x.n_pos) *
                            uint64_t(x.n_kv_heads) * uint64_t(x.head_dim);
  QuantizeCount n;
  for (int l : r.spec.layers) {
    if (has_k(spec.part))
      n.k += count_kv_quantize_changes(source.cache, KvPart::k, *spec.quantize, spec.rotation, l,
                                       0, x.n_pos);
    if (has_v(spec.part))
      n.v += count_kv_quantize_changes(source.cache, KvPart::v, *spec.quantize, spec.rotation, l,
                                       0, x.n_pos);
  }
  r.affected_k = has_k(spec.part) ? per_part : 0;
  r.affected_v = has_v(spec.part) ? per_part : 0;
  r.changed_k = n.k;
  r.changed_v = n.v;
  return r;
}

}  // namespace

const char* perturb_part_name(PerturbPart p) {
  switch (p) {
    case PerturbPart::k: return "k";
    case PerturbPart::v: return "v";
    case PerturbPart::kv: return "kv";
  }
  return "?";
}

PerturbPart parse_perturb_part(const std::string& s) {
  if (s == "k") return PerturbPart::k;
  if (s == "v") return PerturbPart::v;
  if (s == "kv") return PerturbPart::kv;
  fail_field("kv perturb", "--part", "k, v or kv", s);
}

PerturbReceipt make_receipt(const ComparedState& source, const PerturbSpec& spec) {
  check_state_consistent(source, "kv perturb");
  if (source.identity.kind != "native") {
    fail_field("kv perturb", "source kind", "native (a snapshot exported by the model)",
               source.identity.kind);
  }
  const StateCoordinates& x = source.coords;
  if (spec.quantize) return make_quantize_receipt(source, spec);
  if (spec.layer < 0 || spec.layer >= x.n_layers) {
    fail_field("kv perturb", "--layer", "0.." + std::to_string(x.n_layers - 1),
               std::to_string(spec.layer));
  }
  if (spec.head < 0 || spec.head >= x.n_kv_heads) {
    fail_field("kv perturb", "--head", "0.." + std::to_string(x.n_kv_heads - 1),
               std::to_string(spec.head));
  }
  if (!spec.zero && !std::isfinite(bits_to_f32(spec.scale_bits))) {
    fail_field("kv perturb", "--scale", "a finite number", hex32(spec.scale_bits));
  }
  PerturbReceipt r = receipt_for(source, spec);
  if (spec.zero) r.spec.scale_bits = 0;
  const uint64_t per_part = uint64_t(x.n_pos) * uint64_t(x.head_dim);
  if (has_k(spec.part)) {
    r.affected_k = per_part;
    r.changed_k = count_changes(source.cache, true, r.spec);
  }
  if (has_v(spec.part)) {
    r.affected_v = per_part;
    r.changed_v = count_changes(source.cache, false, r.spec);
  }
  // The receipt must describe a finite cache (refuse_non_finite): the selected rows, scaled.
  for (const bool keys : {true, false}) {
    if (spec.zero || !(keys ? has_k(spec.part) : has_v(spec.part))) continue;
    const uint16_t* row = keys ? source.cache.k_row(spec.layer, spec.head, 0) : source.cache.v_row(spec.layer, spec.head, 0);
    for (size_t i = 0, n = selected_count(source.cache); i < n; ++i) {
      if ((perturb_one(row[i], r.spec) & 0x7c00u) != 0x7c00u || (row[i] & 0x7c00u) == 0x7c00u) continue;
      char found[96];
      std::snprintf(found, sizeof found, "inf from %.9g (f16's largest value is 65504)", double(f16_to_f32(row[i])));
      const size_t hd = size_t(x.head_dim);
      fail_field("kv perturb", "--scale " + a_number(bits_to_f32(spec.scale_bits)) + ": " +
                                   (keys ? "K" : "V") + " layer " + std::to_string(spec.layer) + " kv_head " +
                                   std::to_string(spec.head) + " position " + std::to_string(i / hd) + " dim " +
                                   std::to_string(i % hd),
                 "finite after the perturbation", found);
    }
  }
  return r;
}

std::string describe_operation(const PerturbSpec& s) {
  const std::string part = std::string(" part ") + perturb_part_name(s.part);
  if (s.quantize)
    return "quantize " + gguf::type_name(uint32_t(*s.quantize)) + " (llama.cpp KV cache, rotation " +
           kv_rotation_name(s.rotation) + ") layers " + layers_text(s.layers) + " all heads" + part;
  char scale[32];
  std::snprintf(scale, sizeof scale, "scale %.9g", double(bits_to_f32(s.scale_bits)));
  return std::string(s.zero ? "zero" : scale) + " layer " + std::to_string(s.layer) + " head " +
         std::to_string(s.head) + part;
}

std::string receipt_json(const PerturbReceipt& r) {
  ojson j;
  j["format"] = kReceiptFormat;
  j["version"] = kReceiptVersion;
  j["source"] = {{"kind", "native"},
                 {"snapshot_id", r.source_snapshot_id},
                 {"keys_sha256", r.source_keys_sha256},
                 {"values_sha256", r.source_values_sha256},
                 {"model_identity", r.source_model_identity},
                 {"geometry",
                  {{"layers", r.n_layers},
                   {"kv_heads", r.n_kv_heads},
                   {"head_dim", r.head_dim},
                   {"positions", r.n_pos}}}};
  if (r.spec.quantize) {
    j["selection"] = {{"layers", r.spec.layers},
                      {"heads", "all"},
                      {"part", perturb_part_name(r.spec.part)},
                      {"positions", {{"begin", 0}, {"end", r.n_pos}}}};
  } else {
    j["selection"] = {{"layer", r.spec.layer},
                      {"head", r.spec.head},
                      {"part", perturb_part_name(r.spec.part)},
                      {"positions", {{"begin", 0}, {"end", r.n_pos}}}};
  }
  if (r.spec.quantize) {
    j["operation"] = {{"kind", "quantize"},
                      {"type", gguf::type_name(uint32_t(*r.spec.quantize))},
                      {"rotation", kv_rotation_name(r.spec.rotation)},
                      {"rotation_block",
                       {{"k", kv_rotation_block(r.spec.rotation, r.head_dim, KvPart::k)},
                        {"v", kv_rotation_block(r.spec.rotation, r.head_dim, KvPart::v)}}},
                      {"encoder", kQuantEncoder},
                      {"row", "one position of one layer, all KV heads"},
                      {"store", "f16, nearest even"}};
  } else if (r.spec.zero) {
    j["operation"] = {{"kind", "zero"}, {"scale_f32_bits", nullptr}, {"scale", nullptr}};
  } else {
    j["operation"] = {{"kind", "scale"},
                      {"scale_f32_bits", hex32(r.spec.scale_bits)},
                      {"scale", double(bits_to_f32(r.spec.scale_bits))}};
  }
  j["affected_elements"] = {{"k", r.affected_k}, {"v", r.affected_v}};
  j["changed_elements"] = {{"k", r.changed_k}, {"v", r.changed_v}};
  j["writes_cache"] = false;
  return j.dump(2) + "\n";
}

PerturbReceipt parse_receipt(const std::string& text, const std::string& where) {
  PerturbReceipt r;
  std::string field = "(document)";
  try {
    const ojson j = ojson::parse(text);
    auto get = [&](const ojson& obj, const char* key) -> const ojson& {
      field = key;
      return obj.at(key);
    };
    if (get(j, "format").get<std::string>() != kReceiptFormat) {
      fail_field(where, "format", kReceiptFormat, j["format"].dump());
    }
    if (get(j, "version").get<int>() != kReceiptVersion) {
      fail_field(where, "version", std::to_string(kReceiptVersion), j["version"].dump());
    }
    const ojson& src = get(j, "source");
    r.source_snapshot_id = get(src, "snapshot_id").get<std::string>();
    r.source_keys_sha256 = get(src, "keys_sha256").get<std::string>();
    r.source_values_sha256 = get(src, "values_sha256").get<std::string>();
    r.source_model_identity = get(src, "model_identity").get<std::string>();
    const ojson& g = get(src, "geometry");
    r.n_layers = get(g, "layers").get<int>();
    r.n_kv_heads = get(g, "kv_heads").get<int>();
    r.head_dim = get(g, "head_dim").get<int>();
    r.n_pos = get(g, "positions").get<int>();
    const ojson& op = get(j, "operation");
    const std::string kind = get(op, "kind").get<std::string>();
    const ojson& sel = get(j, "selection");
    if (kind == "quantize") {
      r.spec.layers = get(sel, "layers").get<std::vector<int>>();
    } else {
      r.spec.layer = get(sel, "layer").get<int>();
      r.spec.head = get(sel, "head").get<int>();
    }
    r.spec.part = parse_perturb_part(get(sel, "part").get<std::string>());
    if (kind == "quantize") {
      const std::string type = get(op, "type").get<std::string>();
      const auto t = gguf::parse_type_name(type);
      if (!t || !gguf::is_kv_cache_quant_type(*t))
        fail_field(where, "operation.type", "one of q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl", type);
      r.spec.quantize = *t;
      r.spec.scale_bits = 0;
      r.spec.rotation = parse_kv_rotation(get(op, "rotation").get<std::string>(), where.c_str(),
                                          "operation.rotation");
    } else if (kind == "zero") {
      r.spec.zero = true;
      r.spec.scale_bits = 0;
    } else if (kind == "scale") {
      const std::string bits = get(op, "scale_f32_bits").get<std::string>();
      unsigned int v = 0;
      char tail = 0;
      if (bits.size() != 10 || std::sscanf(bits.c_str(), "0x%8x%c", &v, &tail) != 1) {
        fail_field(where, "operation.scale_f32_bits", "0x followed by 8 hex digits", bits);
      }
      r.spec.scale_bits = v;
    } else {
      fail_field(where, "operation.kind", "zero, scale or quantize", kind);
    }
    const ojson& aff = get(j, "affected_elements");
    r.affected_k = get(aff, "k").get<uint64_t>();
    r.affected_v = get(aff, "v").get<uint64_t>();
    const ojson& ch = get(j, "changed_elements");
    r.changed_k = get(ch, "k").get<uint64_t>();
    r.changed_v = get(ch, "v").get<uint64_t>();
  } catch (const nlohmann::json::exception& e) {
    fail_field(where, field, "a well-formed perturbation receipt", e.what());
  }
  if (receipt_json(r) != text) {
    fail_field(where, "canonical form",
               "the exact bytes `ember kv perturb` writes (receipts are never edited)",
               "a document that differs from its canonical form");
  }
  return r;
}

void write_receipt(const std::string& path, const PerturbReceipt& r, bool force) {
  write_file_atomic(path, receipt_json(r), force);
}

PerturbedState apply_perturbation(ComparedState source, const PerturbReceipt& r, bool allow_non_finite) {
  const char* where = "perturbation receipt";
  check_state_consistent(source, where);
  auto same = [&](const char* field, const std::string& want, const std::string& got) {
    if (want != got) fail_field(where, field, want + " (receipt)", got + " (RIGHT)");
  };
  if (source.identity.kind != "native") {
    fail_field(where, "source kind", "native (receipt)", source.identity.kind + " (RIGHT)");
  }
  same("source.snapshot_id", r.source_snapshot_id, source.identity.snapshot_id);
  same("source.model_identity", r.source_model_identity, source.identity.model_identity);
  same("source.geometry",
       std::to_string(r.n_layers) + "x" + std::to_string(r.n_kv_heads) + "x" +
           std::to_string(r.head_dim) + "x" + std::to_string(r.n_pos),
       std::to_string(source.coords.n_layers) + "x" + std::to_string(source.coords.n_kv_heads) +
           "x" + std::to_string(source.coords.head_dim) + "x" +
           std::to_string(source.coords.n_pos));
  same("source.keys_sha256", r.source_keys_sha256, active_keys_sha256(source.cache));
  same("source.values_sha256", r.source_values_sha256, active_values_sha256(source.cache));
  if (r.spec.quantize) {
    checked_layers(r.spec.layers, r.n_layers, where);
    check_kv_quantizable(*r.spec.quantize, r.n_kv_heads, r.head_dim, where);
    if (r.spec.layers.empty()) fail_field(where, "selection.layers", "at least one layer", "[]");
  } else if (r.spec.layer < 0 || r.spec.layer >= r.n_layers || r.spec.head < 0 ||
      r.spec.head >= r.n_kv_heads) {
    fail_field(where, "selection", "a layer and head inside the geometry",
               std::to_string(r.spec.layer) + "/" + std::to_string(r.spec.head));
  }
  const uint64_t per_part =
      r.spec.quantize ? uint64_t(r.spec.layers.size()) * uint64_t(r.n_pos) *
                            uint64_t(r.n_kv_heads) * uint64_t(r.head_dim)
                      : uint64_t(r.n_pos) * uint64_t(r.head_dim);
  const uint64_t want_aff_k = has_k(r.spec.part) ? per_part : 0;
  const uint64_t want_aff_v = has_v(r.spec.part) ? per_part : 0;
  if (r.affected_k != want_aff_k || r.affected_v != want_aff_v) {
    fail_field(where, "affected_elements",
               std::to_string(want_aff_k) + "/" + std::to_string(want_aff_v),
               std::to_string(r.affected_k) + "/" + std::to_string(r.affected_v));
  }
  uint64_t changed_k = 0, changed_v = 0;
  if (r.spec.quantize) {
    const QuantizeCount n = quantize_selected(source.cache, r.spec, true);
    changed_k = n.k;
    changed_v = n.v;
  } else {
    if (has_k(r.spec.part)) changed_k = apply_rows(source.cache, true, r.spec);
    if (has_v(r.spec.part)) changed_v = apply_rows(source.cache, false, r.spec);
  }
  if (changed_k != r.changed_k || changed_v != r.changed_v) {
    fail_field(where, "changed_elements",
               std::to_string(r.changed_k) + "/" + std::to_string(r.changed_v) + " (receipt)",
               std::to_string(changed_k) + "/" + std::to_string(changed_v) + " (applied)");
  }
  if (!allow_non_finite) refuse_non_finite(source.cache, where, " (kv compare --allow-non-finite analyses it anyway)");
  PerturbedState out;
  out.receipt_sha256_ = sha256_hex(receipt_json(r));
  out.receipt_ = r;
  out.state_ = std::move(source);
  StateIdentity& id = out.state_.identity;
  id.provenance.emplace_back("perturbation_receipt", out.receipt_sha256_);
  id.provenance.emplace_back("perturbation_source_snapshot", id.snapshot_id);
  id.kind = "perturbed";
  id.snapshot_id.clear();  // not a snapshot: it exists only in memory
  id.keys_sha256 = active_keys_sha256(out.state_.cache);
  id.values_sha256 = active_values_sha256(out.state_.cache);
  return out;
}

}  // namespace ember::analysis
