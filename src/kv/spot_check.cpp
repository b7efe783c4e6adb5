#include "kv/spot_check.h"

#include <cstdio>

#include "kv/recompute_rows.h"
#include "model/generate.h"
#include "util/error.h"

namespace ember::kv {
namespace {

std::string hex16(uint16_t v) {
  char b[8];
  std::snprintf(b, sizeof b, "0x%04x", unsigned(v));
  return b;
}

// The first differing element of position p, in check order.
std::optional<SpotRowDiff> compare_position(const model::KvCache& stored, const model::KvCache& again, int p) {
  for (int l = 0; l < stored.n_layers; ++l)
    for (int h = 0; h < stored.n_kv_heads; ++h)
      for (bool values : {false, true}) {
        const uint16_t* a = values ? stored.v_row(l, h, p) : stored.k_row(l, h, p);
        const uint16_t* b = values ? again.v_row(l, h, p) : again.k_row(l, h, p);
        for (int d = 0; d < stored.head_dim; ++d)
          if (a[d] != b[d]) return SpotRowDiff{p, l, h, values, d, a[d], b[d]};
      }
  return std::nullopt;
}

}  // namespace

std::string SpotRowDiff::describe() const {
  return std::string(values ? "V" : "K") + " row of layer " + std::to_string(layer) + ", kv_head " +
         std::to_string(kv_head) + ", position " + std::to_string(position) + " (dim " + std::to_string(dim) +
         ": stored " + hex16(stored) + ", recomputed " + hex16(recomputed) + ")";
}

const SpotRowDiff* SpotReport::first_diff() const {
  for (const SpotPosition& p : positions)
    if (p.diff) return &*p.diff;
  return nullptr;
}

std::string SpotReport::summary() const {
  if (const SpotRowDiff* d = first_diff())
    return "the stored prefix does not recompute to its cache: " + d->describe();
  if (logits == "differs")
    return "the boundary logits recomputed over the stored prefix hash to " + logits_found + ", not " +
           logits_expected + " (proof.boundary_logits_sha256)";
  if (!resume_ok)
    return "the boundary logits recomputed over the stored prefix select token " + std::to_string(resume_found) +
           ", not the manifest's resume token";
  return "ok: " + std::to_string(positions.size()) + " positions recomputed bit for bit" +
         (logits == "ok" ? ", boundary logits as recorded" : ", boundary logits not recorded");
}

SpotReport spot_check(model::Engine& engine, const SnapshotManifest& m, const model::KvCache& cache, int k,
                      uint64_t seed) {
  const int P = m.geometry.positions;
  if (cache.n_pos != P || int64_t(m.prefix.tokens.size()) != P)
    fail_field("spot check", "cache", std::to_string(P) + " positions (geometry.positions)",
               std::to_string(cache.n_pos));
  if (k < 1) fail_field("spot check", "--spot", ">= 1 positions", std::to_string(k));
  SpotReport r;
  const std::vector<int> at = spot_positions(P, k, seed);
  recompute_positions(engine, cache, m.prefix.tokens, at, [&](const RecomputedPosition& x) {
    r.positions.push_back({x.position, compare_position(*x.stored, *x.recomputed, x.position)});
    if (x.position != P - 1) return;
    r.logits_found = logits_hash(x.logits);
    r.resume_found = model::argmax(x.logits.data(), int(x.logits.size()));
    r.resume_ok = r.resume_found == m.resume.token;
    r.logits_expected = m.proof.boundary_logits_sha256;
    if (!r.logits_expected.empty()) r.logits = r.logits_found == r.logits_expected ? "ok" : "differs";
  });
  return r;
}

}  // namespace ember::kv
