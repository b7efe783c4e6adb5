// kv doctor: the verdict, the attribution of a compatible cache's error, the next tokens.
#include "kv/doctor.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "kv/llamacpp_import.h"
#include "kv/recompute_rows.h"
#include "model/generate.h"
#include "util/error.h"
#include "util/f16.h"

namespace ember::kv {
namespace {

bool contains(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

std::string fmt(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", x);
  return b;
}

// A reader's error, sorted into the verdict it supports; false: unreadable (rethrown).
bool classify_parse_error(const std::string& msg, DoctorReport& r) {
  if (contains(msg, "(truncated")) {
    r.verdict = DoctorVerdict::truncated;
  } else if (contains(msg, "n_token_count") && contains(msg, "context length")) {
    r.verdict = DoctorVerdict::past_context;
  } else if (contains(msg, "v_size_row") || contains(msg, "v_size_el") || contains(msg, "n_embd_v_gqa") ||
             contains(msg, "a transposed V holds single elements")) {
    r.verdict = DoctorVerdict::v_layout_mismatch;
  } else if (contains(msg, "n_layer") || contains(msg, "k_size_row") || contains(msg, "n_token_count") ||
             contains(msg, "tokens[")) {
    r.verdict = DoctorVerdict::wrong_model;  // another geometry, context or vocabulary
  } else {
    return false;
  }
  r.reason = msg;
  return true;
}

std::vector<RowError> rows_past(const PartCheck& p, double bound) {
  std::vector<RowError> out;
  for (const RowError& e : p.rows)
    if (!(e.error <= bound)) out.push_back(e);
  return out;
}

// Share of layer-0 rows over the layer-0 bound: a wrong weight, token or position moves
// nearly all of them, a corrupt row one.
double layer0_share_over(const PartCheck& p) {
  int n = 0, over = 0;
  for (const RowError& e : p.rows)
    if (e.layer == 0) ++n, over += !(e.error <= p.layer0.bound);
  return n ? double(over) / n : 0;
}

// Pooled relative RMS error of stored layer `l` against the recomputed rows of layer `m`
// modelled as `t`, over the checked positions (kv doctor's test for misplaced layers).
double layer_against(const model::KvCache& cache, const ModelCheck& c, bool keys, int l, int m,
                     const StoredRowType& t) {
  const int H = cache.n_kv_heads, D = cache.head_dim;
  const size_t n = size_t(H) * size_t(D);
  const std::vector<float>& rows = keys ? c.k_f32 : c.v_f32;
  std::vector<float> mod(n);
  double d2 = 0, r2 = 0;
  for (size_t i = 0; i < c.positions.size(); ++i) {
    model_stored_row(t, rows.data() + (i * size_t(cache.n_layers) + size_t(m)) * n, mod.data(), int64_t(n));
    for (int h = 0; h < H; ++h) {
      const uint16_t* got = keys ? cache.k_row(l, h, c.positions[i]) : cache.v_row(l, h, c.positions[i]);
      for (int j = 0; j < D; ++j) {
        const double g = f16_to_f32(got[j]), w = mod[size_t(h) * D + size_t(j)];
        d2 += (g - w) * (g - w);
        r2 += w * w;
      }
    }
  }
  return r2 > 0 ? std::sqrt(d2 / r2) : std::sqrt(d2);
}

// "layer 2 holds layer 1's keys" for each bad layer whose rows are another layer's.
std::string misplaced_layers(const model::KvCache& cache, const ModelCheck& c, bool keys,
                             const std::vector<RowError>& bad) {
  const PartCheck& p = keys ? c.k : c.v;
  std::vector<int> layers;
  for (const RowError& e : bad)
    if (std::find(layers.begin(), layers.end(), e.layer) == layers.end()) layers.push_back(e.layer);
  std::string out;
  for (int l : layers)
    for (int m = 0; m < cache.n_layers; ++m)
      if (m != l && layer_against(cache, c, keys, l, m, p.stored) <= p.all.bound)
        out += std::string(out.empty() ? "" : ", ") + "layer " + std::to_string(l) + " holds layer " +
               std::to_string(m) + "'s " + (keys ? "keys" : "values");
  return out;
}

std::string name_rows(const std::vector<RowError>& bad, const char* part) {
  std::string s;
  const size_t shown = std::min<size_t>(bad.size(), 4);
  for (size_t i = 0; i < shown; ++i)
    s += std::string(i ? ", " : "") + part + " layer " + std::to_string(bad[i].layer) + " head " +
         std::to_string(bad[i].head) + " position " + std::to_string(bad[i].position) + " (" +
         fmt(bad[i].error) + ")";
  if (bad.size() > shown) s += " and " + std::to_string(bad.size() - shown) + " more";
  return s;
}

void decide(const model::KvCache& cache, DoctorReport& r) {
  const ModelCheck& c = r.check;
  r.bad_k = rows_past(c.k, model_check_bound_row(c.k.stored));
  r.bad_v = rows_past(c.v, model_check_bound_row(c.v.stored));
  const double k0 = layer0_share_over(c.k), v0 = layer0_share_over(c.v);
  const size_t rows = c.k.rows.size();
  const double bad_share = rows ? double(r.bad_k.size() + r.bad_v.size()) / double(2 * rows) : 0;
  if (c.ok() && r.bad_k.empty() && r.bad_v.empty()) {
    r.verdict = DoctorVerdict::compatible;
    r.reason = "the model computes these rows: " + model_check_figures(c);
    return;
  }
  const std::string swapped = misplaced_layers(cache, c, true, r.bad_k) +
                              (r.bad_k.empty() || r.bad_v.empty() ? "" : "; ") +
                              misplaced_layers(cache, c, false, r.bad_v);
  if (swapped.size() > 2) {
    r.verdict = DoctorVerdict::corrupt;
    r.reason = "misplaced layers: " + swapped;
    return;
  }
  const bool k_clean = c.k.ok() && r.bad_k.empty();
  if (k_clean && v0 >= 0.5) {
    r.verdict = DoctorVerdict::v_layout_mismatch;
    r.reason = "keys agree and values do not, layer 0 included (" + fmt(v0 * 100) +
               " % of its rows): V stored in another layout than its flag says, or with flash "
               "attention against the file's layout";
    return;
  }
  if (std::max(k0, v0) >= 0.25) {
    r.verdict = DoctorVerdict::wrong_model;
    r.reason = "layer 0 (no attention in front of it) is off on " + fmt(std::max(k0, v0) * 100) +
               " % of its rows: another weight quantization or model computed this cache (" +
               model_check_figures(c) + ")";
    if (!c.k.layer0.ok() && c.k.layer0.error < 20 * c.k.layer0.bound && c.k.stored.type == kGgmlF16)
      r.reason += "; close to the rounding floor: as F16 weights for an F32 model measure";
    return;
  }
  if (bad_share <= 0.1 && !(r.bad_k.empty() && r.bad_v.empty())) {
    r.verdict = DoctorVerdict::corrupt;
    r.reason = "rows off the model's: " + name_rows(r.bad_k, "K") +
               (r.bad_k.empty() || r.bad_v.empty() ? "" : "; ") + name_rows(r.bad_v, "V") +
               " (later rows read corrupt ones through attention: the earliest position is the cause)";
    return;
  }
  r.verdict = DoctorVerdict::wrong_model;
  r.reason = "rows of the later layers are off (" + fmt(bad_share * 100) +
             " % past the row bound): another model or fine-tune computed this cache (" +
             model_check_figures(c) + ")";
}

// Per (layer, head, part), pooled over the checked positions: the error against the full
// model of the store, against plain f16 rounding, and against the type without rotation.
void attribute(const model::KvCache& cache, DoctorReport& r) {
  const ModelCheck& c = r.check;
  const int L = cache.n_layers, H = cache.n_kv_heads, D = cache.head_dim;
  const size_t n = size_t(H) * size_t(D);
  for (bool keys : {true, false}) {
    const PartCheck& p = keys ? c.k : c.v;
    const std::vector<float>& rows = keys ? c.k_f32 : c.v_f32;
    const StoredRowType plain{kGgmlF16, 0}, norot{p.stored.type, 0};
    std::vector<float> full(n), pl(n), nr(n);
    std::vector<double> d2(size_t(L) * H * 3), r2(size_t(L) * H);
    for (size_t i = 0; i < c.positions.size(); ++i)
      for (int l = 0; l < L; ++l) {
        const float* x = rows.data() + (i * size_t(L) + size_t(l)) * n;
        model_stored_row(p.stored, x, full.data(), int64_t(n));
        model_stored_row(plain, x, pl.data(), int64_t(n));
        model_stored_row(norot, x, nr.data(), int64_t(n));
        for (int h = 0; h < H; ++h) {
          const uint16_t* got = keys ? cache.k_row(l, h, c.positions[i]) : cache.v_row(l, h, c.positions[i]);
          const size_t at = size_t(l) * H + size_t(h);
          for (int j = 0; j < D; ++j) {
            const size_t e = size_t(h) * D + size_t(j);
            const double g = f16_to_f32(got[j]);
            d2[at * 3] += (g - full[e]) * (g - full[e]);
            d2[at * 3 + 1] += (g - pl[e]) * (g - pl[e]);
            d2[at * 3 + 2] += (g - nr[e]) * (g - nr[e]);
            r2[at] += double(full[e]) * full[e];
          }
        }
      }
    const bool quantized = p.stored.type != kGgmlF16 && p.stored.type != kGgmlF32 && p.stored.type != kGgmlBf16;
    for (int l = 0; l < L; ++l)
      for (int h = 0; h < H; ++h) {
        const size_t at = size_t(l) * H + size_t(h);
        auto rel = [&](double x) { return r2[at] > 0 ? std::sqrt(x / r2[at]) : std::sqrt(x); };
        HeadAttribution a{l, h, keys ? 'k' : 'v', rel(d2[at * 3]), rel(d2[at * 3 + 1]), rel(d2[at * 3 + 2]), ""};
        if (!quantized) a.without_quant = a.error;
        if (p.stored.rot == 0) a.without_rot = a.error;
        if (a.error == 0) a.explained_by = quantized ? "quantization reproduced block for block" : "bit-identical";
        else if (a.error <= p.layer0.bound) a.explained_by = "rounding floor";
        else if (a.error <= p.all.bound) a.explained_by = "reduction-order drift";
        else a.explained_by = "unexplained";
        r.heads.push_back(a);
      }
  }
}

double top2_margin(const std::vector<float>& z) {
  float a = -INFINITY, b = -INFINITY;
  for (float x : z) {
    if (x > a) b = a, a = x;
    else if (x > b) b = x;
  }
  return double(a) - double(b);
}

// Greedy continuation from the imported cache against a cold prefill of the same prefix, fed
// the cached run's tokens (so each step compares the same context).
void next_tokens(model::Engine& engine, const model::KvCache& cache, std::span<const int32_t> tokens,
                 const DoctorOptions& o, DoctorReport& r) {
  const int P = cache.n_pos, N = std::max(0, std::min(o.next_tokens, engine.position_limit() - P));
  if (N == 0) return;
  const int V = engine.config().n_vocab;
  model::KvCache warm = cache.copy_rows(P, N);
  r.cold_measured = P <= o.cold_limit;
  model::KvCache cold;
  std::vector<float> zc = r.check.logits, zo;
  if (r.cold_measured) {
    cold = engine.new_cache(P + N);
    zo = engine.forward(cold, tokens.first(size_t(P)));
  }
  for (int s = 0; s < N; ++s) {
    NextToken t;
    t.cached = model::argmax(zc.data(), V);
    t.margin = top2_margin(zc);
    if (r.cold_measured) {
      t.cold = model::argmax(zo.data(), V);
      t.logit_diff = 0;
      for (int i = 0; i < V; ++i) t.logit_diff = std::max(t.logit_diff, std::fabs(double(zc[size_t(i)]) - zo[size_t(i)]));
      t.same = t.cold == t.cached;
      t.at_risk = !t.same || t.margin <= 2 * t.logit_diff;
    }
    r.next.push_back(t);
    if (s + 1 == N) break;
    zc = engine.forward(warm, std::span<const int32_t>(&t.cached, 1));
    if (r.cold_measured) zo = engine.forward(cold, std::span<const int32_t>(&t.cached, 1));
  }
}


// The check, the verdict and, when compatible, the attribution and the next tokens, for a
// cache already read (its rows in ember's f16 layout, stored by the other engine as k / v).
void diagnose_cache(model::Engine& engine, const model::KvCache& cache, std::span<const int32_t> tokens,
                    const StoredRowType& k, const StoredRowType& v, const std::string& v_layout,
                    const DoctorOptions& options, DoctorReport& r) {
  r.parsed = true;
  r.positions = cache.n_pos;
  r.type_k = stored_row_type_name(k);
  r.type_v = stored_row_type_name(v);
  r.v_layout = v_layout;
  std::vector<int> positions;
  if (options.positions > 0) {
    positions = spot_positions(r.positions, options.positions, kModelCheckSeed);
  } else {
    positions.resize(size_t(r.positions));
    for (int i = 0; i < r.positions; ++i) positions[size_t(i)] = i;
  }
  r.check = check_foreign_rows(engine, cache, tokens, k, v, positions, /*keep_rows=*/true);
  decide(cache, r);
  if (r.verdict == DoctorVerdict::compatible) {
    attribute(cache, r);
    next_tokens(engine, cache, tokens, options, r);
  }
}

}  // namespace

const char* doctor_verdict_name(DoctorVerdict v) {
  switch (v) {
    case DoctorVerdict::compatible: return "compatible";
    case DoctorVerdict::wrong_model: return "wrong-model";
    case DoctorVerdict::corrupt: return "corrupt";
    case DoctorVerdict::truncated: return "truncated";
    case DoctorVerdict::v_layout_mismatch: return "v-layout-mismatch";
    case DoctorVerdict::past_context: return "past-context";
  }
  return "?";
}

DoctorReport diagnose_llamacpp(std::span<const uint8_t> bytes, const std::string& where,
                               model::Engine& engine, const DoctorOptions& options,
                               const DoctorSidecar& sidecar) {
  DoctorReport r;
  r.file = where;
  r.sidecar = sidecar;
  LlamaCppState st;
  try {
    st = parse_llamacpp_state(bytes, llamacpp_target(engine, options.attn_rot), where);
  } catch (const Error& e) {
    if (!classify_parse_error(e.what(), r)) throw;
    return r;
  }
  diagnose_cache(engine, st.cache, st.tokens, {st.type_k, st.rot_k}, {st.type_v, st.rot_v},
                 st.v_trans ? "transposed" : "rows", options, r);
  return r;
}

namespace {

// "q4_0" and "hadamard-64" (the provenance's names) back to the stored type.
StoredRowType stored_from_names(const std::string& type, const std::string& rotation, const std::string& where,
                                const char* field) {
  StoredRowType t;
  int32_t found = -1;
  for (int32_t n : {kGgmlF32, kGgmlF16, kGgmlBf16, kGgmlQ8_0, kGgmlQ4_0, kGgmlQ4_1, kGgmlQ5_0, kGgmlQ5_1, kGgmlIq4Nl})
    if (ggml_kv_type_name(n) == type) found = n;
  if (found < 0) fail_field(where, field, "a cache type ember reads", "'" + type + "'");
  t.type = found;
  // The manifest's reader checked the form (none | hadamard-N); a bad N leaves 0.
  if (rotation.rfind("hadamard-", 0) == 0)
    std::from_chars(rotation.data() + 9, rotation.data() + rotation.size(), t.rot);
  return t;
}

}  // namespace

DoctorReport diagnose_foreign_state(const VerifiedState& s, model::Engine& engine, const DoctorOptions& options,
                                    const std::string& where) {
  DoctorReport r;
  r.file = where;
  const ForeignProvenance* f = s.header().foreign();
  if (!f) fail_field(where, "format", "a foreign cache (ember.kv-foreign)", "another kind");
  const model::KvCache& c = s.cache();
  const std::vector<int32_t>& tokens = s.manifest().prefix.tokens;
  if (c.n_pos > engine.position_limit() - 1) {
    r.verdict = DoctorVerdict::past_context;
    r.reason = where + ": positions: expected at most " + std::to_string(engine.position_limit() - 1) +
               " (the model's context length), found " + std::to_string(c.n_pos);
    return r;
  }
  const model::ModelConfig& cfg = engine.config();
  if (c.n_layers != cfg.n_layers || c.n_kv_heads != cfg.n_kv_heads || c.head_dim != cfg.head_dim) {
    r.verdict = DoctorVerdict::wrong_model;
    r.reason = where + ": geometry: expected the model's, found " + std::to_string(c.n_layers) + " layers x " +
               std::to_string(c.n_kv_heads) + " KV heads x " + std::to_string(c.head_dim);
    return r;
  }
  const std::string vl = f->detail("v_layout");
  diagnose_cache(engine, c, tokens,
                 stored_from_names(f->cache_type_k, f->detail("k_rotation"), where, "foreign.cache_type_k"),
                 stored_from_names(f->cache_type_v, f->detail("v_rotation"), where, "foreign.cache_type_v"),
                 vl.empty() ? f->detail("layout") : vl, options, r);
  return r;
}

}  // namespace ember::kv
