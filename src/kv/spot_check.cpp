#include "kv/spot_check.h"

#include <cstdio>

#include "kv/recompute_rows.h"
#include "kv/witness.h"
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

std::string SpotReport::witness_failure() const {
  if (witness != "differs") return "";
  const std::string what = "the witness (" + std::to_string(witness_length) +
                           " tokens continued from the stored cache) differs from the one its producer recorded, ";
  if (witness_first_layer < 0) return what + "in its logits (proof.witness_logits_sha256)";
  const std::string l = std::to_string(witness_first_layer);
  // The layers below read rows nothing changed, from inputs nothing changed: the first layer
  // that differs holds changed rows.
  return what + "first in the attention scores or output of layer " + l + " (proof.witness_attention_sha256[" + l +
         "]): rows of layer " + l + " are not the ones the stored prefix computes";
}

std::string SpotReport::summary() const {
  if (const SpotRowDiff* d = first_diff())
    return "the stored prefix does not recompute to its cache: " + d->describe();
  if (witness == "differs") return witness_failure();
  if (logits == "differs")
    return "the boundary logits recomputed over the stored prefix hash to " + logits_found + ", not " +
           logits_expected + " (proof.boundary_logits_sha256)";
  if (!resume_ok)
    return "the boundary logits recomputed over the stored prefix select token " + std::to_string(resume_found) +
           ", not the manifest's resume token";
  return "ok: " + std::to_string(positions.size()) + " positions recomputed bit for bit" +
         (logits == "ok" ? ", boundary logits as recorded" : ", boundary logits not recorded") +
         (witness == "ok" ? ", witness of " + std::to_string(witness_length) + " tokens as recorded"
                          : ", no witness recorded");
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
  RecomputeOptions batched;
  batched.f32_rows = false;  // the check compares f16 rows bit for bit
  recompute_positions(engine, cache, m.prefix.tokens, at, [&](const RecomputedPosition& x) {
    r.positions.push_back({x.position, compare_position(*x.stored, *x.recomputed, x.position)});
    if (x.position != P - 1) return;
    r.logits_found = logits_hash(x.logits);
    r.resume_found = model::argmax(x.logits.data(), int(x.logits.size()));
    r.resume_ok = r.resume_found == m.resume.token;
    r.logits_expected = m.proof.boundary_logits_sha256;
    if (!r.logits_expected.empty()) r.logits = r.logits_found == r.logits_expected ? "ok" : "differs";
  }, batched);
  const ProofInfo& proof = m.proof;
  if (!proof.witness_tokens.empty()) {
    const Witness w = run_witness(engine, cache, proof.witness_tokens);
    r.witness_length = int(proof.witness_tokens.size());
    r.witness = "ok";
    for (size_t l = 0; l < w.attention_sha256.size() && l < proof.witness_attention_sha256.size(); ++l)
      if (w.attention_sha256[l] != proof.witness_attention_sha256[l]) {
        r.witness = "differs";
        r.witness_first_layer = int(l);
        break;
      }
    if (w.logits_sha256 != proof.witness_logits_sha256) r.witness = "differs";
  }
  return r;
}

}  // namespace ember::kv
