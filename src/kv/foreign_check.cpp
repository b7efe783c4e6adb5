#include "kv/foreign_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kv/recompute_rows.h"
#include "util/error.h"
#include "util/f16.h"

namespace ember::kv {
namespace {

bool is_float_type(int32_t t) { return t == kGgmlF32 || t == kGgmlF16 || t == kGgmlBf16; }

std::string fmt(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", x);
  return b;
}

// Sums of one part over every checked row, then the pooled error.
struct Pool {
  double diff2 = 0, ref2 = 0;
  void add(double d2, double r2) { diff2 += d2, ref2 += r2; }
  double error() const { return ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2); }
};

void note_row(PooledError& e, const RowError& r) {
  if (e.rows++ == 0 || !(r.error <= e.worst.error)) e.worst = r;
}

void compare_part(PartCheck& part, Pool* pool, const model::KvCache& stored, bool keys,
                  std::span<const float> rows32, int p, std::vector<float>& modelled) {
  const int H = stored.n_kv_heads, D = stored.head_dim;
  const size_t n = size_t(H) * size_t(D);
  for (int l = 0; l < stored.n_layers; ++l) {
    model_stored_row(part.stored, rows32.data() + size_t(l) * n, modelled.data(), int64_t(n));
    for (int h = 0; h < H; ++h) {
      const uint16_t* got = keys ? stored.k_row(l, h, p) : stored.v_row(l, h, p);
      const float* want = modelled.data() + size_t(h) * D;
      double d2 = 0, r2 = 0;
      for (int j = 0; j < D; ++j) {
        const double g = f16_to_f32(got[j]), w = want[j];
        d2 += (g - w) * (g - w);
        r2 += w * w;
        part.differing += f32_to_f16(float(w)) != got[j];
      }
      part.elements += uint64_t(D);
      const double e = r2 > 0 ? std::sqrt(d2 / r2) : std::sqrt(d2 / D);
      part.rows.push_back({l, h, p, e});
      pool[1].add(d2, r2);
      note_row(part.all, part.rows.back());
      if (l == 0) {
        pool[0].add(d2, r2);
        note_row(part.layer0, part.rows.back());
      }
    }
  }
}

}  // namespace

std::string stored_row_type_name(const StoredRowType& t) {
  const std::string name = ggml_kv_type_name(t.type);
  return t.rot > 0 ? name + "+hadamard-" + std::to_string(t.rot) : name;
}

void model_stored_row(const StoredRowType& t, const float* x, float* out, int64_t n) {
  if (t.type == kGgmlBf16) {
    for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(f32_to_bf16(x[i]));
  } else if (is_float_type(t.type)) {
    std::copy_n(x, n, out);
  } else {
    std::vector<uint8_t> blocks(size_t(ggml_kv_row_bytes(t.type, uint64_t(n))));
    EMBER_CHECK(!blocks.empty());
    llamacpp_store_row(t.type, t.rot, x, blocks.data(), out, n);
  }
  for (int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(f32_to_f16(out[i]));
}

// Measured on the 21 llama.cpp fixtures and their 48 wrong pairings
// (ForeignCheckFixtures.RightPairingsPassWrongOnesAreRefused; the table is in
// docs/formats/llamacpp-state.md, "The model check").
double model_check_bound_layer0(const StoredRowType& t) {
  switch (t.type) {
    // Right pairings at most 7.5e-6; F16 weights for an F32 cache (the nearest wrong one) at
    // least 1.6e-4 (keys) and 3.9e-4 (values): 6.7x above the one, 3.2x below the other.
    case kGgmlF32:
    case kGgmlF16: return 5e-5;
    // bf16 rounds 8x coarser than f16 (8 mantissa bits against 11): the same floor scaled.
    case kGgmlBf16: return 4e-4;
    // Quantized: every right pairing reproduced block for block (0 exactly); the allowance is
    // for the drift of larger models flipping a code: about 0.25 % of codes flipped, the
    // type's step over a row's RMS times sqrt(0.0025). Nearest wrong pairing (another weight
    // quantization): 0.012 for q8_0 (12x), 0.045 for q4_0 (3x).
    case kGgmlQ8_0: return 1e-3;
    case kGgmlQ5_0:
    case kGgmlQ5_1: return 8e-3;
    default: return 1.5e-2;  // q4_0, q4_1, iq4_nl
  }
}

double model_check_bound_all(const StoredRowType& t) {
  switch (t.type) {
    // Right pairings at most 0.020 (Q6_K weights with flash attention: llama.cpp accumulates
    // V in f16 and quantizes activations); another fine-tune (stories260K-kjv-top) at least
    // 0.083 (keys) and 0.49 (values).
    case kGgmlF32:
    case kGgmlF16: return 0.04;
    case kGgmlBf16: return 0.05;
    case kGgmlQ8_0: return 0.05;     // right pairings at most 0.026
    case kGgmlQ5_0:
    case kGgmlQ5_1: return 0.12;     // not measured (no fixture): between q8_0 and q4_0
    default: return 0.2;             // q4_0 right pairings at most 0.109
  }
}

// Every right pairing's worst row (every position, ForeignCheckFixtures): f16 0.047, q8_0
// 0.059, q4_0 0.27; about three times that.
double model_check_bound_row(const StoredRowType& t) {
  switch (t.type) {
    case kGgmlF32:
    case kGgmlF16:
    case kGgmlBf16:
    case kGgmlQ8_0: return 0.15;
    case kGgmlQ5_0:
    case kGgmlQ5_1: return 0.4;
    default: return 0.8;
  }
}

ModelCheck check_foreign_rows(model::Engine& engine, const model::KvCache& cache,
                              std::span<const int32_t> tokens, const StoredRowType& k,
                              const StoredRowType& v, std::span<const int> positions,
                              bool keep_rows) {
  ModelCheck c;
  c.positions.assign(positions.begin(), positions.end());
  c.k.stored = k;
  c.v.stored = v;
  for (PartCheck* p : {&c.k, &c.v}) {
    p->layer0.bound = model_check_bound_layer0(p->stored);
    p->all.bound = model_check_bound_all(p->stored);
  }
  Pool pk[2], pv[2];
  std::vector<float> modelled(size_t(cache.n_kv_heads) * size_t(cache.head_dim));
  recompute_positions(engine, cache, tokens, positions, [&](const RecomputedPosition& r) {
    compare_part(c.k, pk, cache, true, r.k_f32, r.position, modelled);
    compare_part(c.v, pv, cache, false, r.v_f32, r.position, modelled);
    if (r.position == cache.n_pos - 1) c.logits.assign(r.logits.begin(), r.logits.end());
    if (keep_rows) {
      c.k_f32.insert(c.k_f32.end(), r.k_f32.begin(), r.k_f32.end());
      c.v_f32.insert(c.v_f32.end(), r.v_f32.begin(), r.v_f32.end());
    }
  });
  for (auto [part, pool] : {std::pair{&c.k, pk}, std::pair{&c.v, pv}}) {
    part->layer0.error = pool[0].error();
    part->all.error = pool[1].error();
  }
  return c;
}

std::string model_check_summary(const ModelCheck& c) {
  if (c.skipped) return "model check skipped";
  return std::string("model check ") + (c.ok() ? "passed" : "failed") + " (" +
         std::to_string(c.positions.size()) + " positions)";
}

std::string model_check_figures(const ModelCheck& c) {
  if (c.skipped) return "model check skipped (--no-model-check): nothing compared";
  return model_check_summary(c) + ": keys " + fmt(c.k.layer0.error) + " at layer 0 (bound " +
         fmt(c.k.layer0.bound) + "), " + fmt(c.k.all.error) + " over every layer (bound " +
         fmt(c.k.all.bound) + "); values " + fmt(c.v.layer0.error) + " (" + fmt(c.v.layer0.bound) +
         "), " + fmt(c.v.all.error) + " (" + fmt(c.v.all.bound) + "); stored as " +
         stored_row_type_name(c.k.stored) + " / " + stored_row_type_name(c.v.stored);
}

const PooledError* failed_statistic(const ModelCheck& c, const char** part, bool* layer0) {
  if (c.skipped) return nullptr;
  for (bool l0 : {true, false})
    for (const PartCheck* p : {&c.k, &c.v}) {
      const PooledError& e = l0 ? p->layer0 : p->all;
      if (!e.ok()) {
        *part = p == &c.k ? "keys" : "values";
        *layer0 = l0;
        return &e;
      }
    }
  return nullptr;
}

void refuse_model_check(const ModelCheck& c, const std::string& where) {
  const char* part = "";
  bool layer0 = false;
  const PooledError* e = failed_statistic(c, &part, &layer0);
  EMBER_CHECK(e != nullptr);
  const PartCheck& p = std::string(part) == "keys" ? c.k : c.v;
  const RowError& w = e->worst;
  fail_field(where, "model check",
             std::string(part) + (layer0 ? " of layer 0" : " of every layer") + " within " +
                 fmt(e->bound) + " of the model's own rows stored as " +
                 stored_row_type_name(p.stored) + " (pooled relative RMS error over " +
                 std::to_string(c.positions.size()) + " recomputed positions; " +
                 (layer0 ? "the two engines' rounding floor" : "the two engines' measured drift") + ")",
             fmt(e->error) + ", worst at layer " + std::to_string(w.layer) + " head " +
                 std::to_string(w.head) + " position " + std::to_string(w.position) + " (" +
                 fmt(w.error) + "): " +
                 (layer0 ? "another weight quantization, model, token or position"
                         : "another model or fine-tune, or corrupt rows") +
                 " computed this cache");
}

}  // namespace ember::kv
