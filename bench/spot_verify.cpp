// Detection rate and cost of `kv verify --spot K` (kv/spot_check.h) on corrupted caches whose
// seal agrees with their bytes (a store or serde that re-sealed what it handed back), for the
// six classes of docs/results/spot-verify.md, at K = 1, 2, 4, 8 from one K = 8 draw (the K
// positions of spot_positions(P, K, seed) are a subset of those for 8: the same Fisher-Yates
// prefix), each without and with the witness (kv/witness.h: W tokens of greedy continuation,
// their logits and per-layer attention output hashed in f32).
//
// Two ground truths, each "any logit of a 16-token teacher-forced continuation differs bit for
// bit from the clean cache's":
//   greedy: the resume token, then the clean run's greedy tokens. These are the witness's own
//           tokens, so the witness sees every such change by construction; the figure says
//           what the rows alone see.
//   text:   the 16 tokens that follow the prefix in the prompt file: a continuation the
//           witness never saw, the honest measure of what it generalizes to.
// The cost is the spot check's time (rows and witness) as a fraction of the prefill of the same
// P tokens, measured in this run.
//
//   bench_spot_verify MODEL DERIVED PROMPTS.txt P TRIALS SEED [THREADS [REPS [CLASSES [W]]]]
// CLASSES: a comma-separated subset of the six (default all, or "all"); W: the witness's
// length (default 16, kv export's). Prints one JSON object per line
// per class and a final {"clean": ...} line with false alarms and costs. EMBER_SIMD chooses the
// path.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/compare_metrics.h"
#include "analysis/kv_quantize.h"
#include "kv/recompute_rows.h"
#include "kv/spot_check.h"
#include "kv/witness.h"
#include "model/engine.h"
#include "model/generate.h"
#include "tokenizer/tokenizer.h"
#include "util/f16.h"
#include "util/simd.h"

using namespace ember;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Prefill {
  kv::SnapshotManifest m;     // prefix, resume, boundary logits hash and witness: all the check reads
  kv::SnapshotManifest rows;  // the same without the witness: what the rows alone see
  model::KvCache cache;
  std::vector<int32_t> text;        // the 16 tokens after the prefix in the prompt file
  std::vector<float> text_logits;   // their 16 x vocab logits (teacher-forced, clean)
  std::vector<int32_t> greedy;      // the resume token and 15 greedy tokens (a witness of 16's)
  std::vector<float> greedy_logits;
  double seconds = 0;
};

Prefill prefill(model::Engine& e, const std::vector<int32_t>& tokens, std::vector<int32_t> text, int witness) {
  Prefill p;
  const int P = int(tokens.size());
  p.m.geometry = {e.config().n_layers, e.config().n_kv_heads, e.config().head_dim, P};
  p.m.prefix.tokens = tokens;
  p.cache = e.new_cache(P + 16);
  const auto t = Clock::now();
  const std::vector<float> boundary = e.forward(p.cache, tokens);
  p.seconds = seconds_since(t);
  p.m.proof.boundary_logits_sha256 = kv::logits_hash(boundary);
  p.m.resume.token = model::argmax(boundary.data(), int(boundary.size()));
  p.rows = p.m;
  kv::Witness w = kv::record_witness(e, p.cache, p.m.resume.token, witness);
  p.m.proof.witness_tokens = w.tokens;
  p.m.proof.witness_logits_sha256 = w.logits_sha256;
  p.m.proof.witness_attention_sha256 = w.attention_sha256;
  p.text = std::move(text);
  model::KvCache c = p.cache.copy();
  p.text_logits = e.forward(c, p.text, nullptr, /*all_logits=*/true);
  p.greedy = witness == 16 ? w.tokens : kv::record_witness(e, p.cache, p.m.resume.token, 16).tokens;
  model::KvCache c2 = p.cache.copy();
  p.greedy_logits = e.forward(c2, p.greedy, nullptr, /*all_logits=*/true);
  return p;
}

// Whether any logit of a teacher-forced continuation differs from the clean one.
bool changes(model::Engine& e, const model::KvCache& bad, const std::vector<int32_t>& tokens,
             const std::vector<float>& clean_logits) {
  model::KvCache c = bad.copy();
  const std::vector<float> l = e.forward(c, tokens, nullptr, true);
  return std::memcmp(l.data(), clean_logits.data(), l.size() * sizeof(float)) != 0;
}

void swap_rows(model::KvCache& c, int a, int b) {
  for (int l = 0; l < c.n_layers; ++l)
    for (int h = 0; h < c.n_kv_heads; ++h)
      for (int d = 0; d < c.head_dim; ++d) {
        std::swap(c.k_row(l, h, a)[d], c.k_row(l, h, b)[d]);
        std::swap(c.v_row(l, h, a)[d], c.v_row(l, h, b)[d]);
      }
}

void copy_rows(const model::KvCache& from, model::KvCache& to, int p0, int p1) {
  for (int l = 0; l < to.n_layers; ++l)
    for (int h = 0; h < to.n_kv_heads; ++h) {
      std::copy(from.k_row(l, h, p0), from.k_row(l, h, p1), to.k_row(l, h, p0));
      std::copy(from.v_row(l, h, p0), from.v_row(l, h, p1), to.v_row(l, h, p0));
    }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 7) {
    std::fprintf(stderr, "usage: %s MODEL DERIVED PROMPTS.txt P TRIALS SEED [THREADS [REPS [CLASSES [W]]]]\n", argv[0]);
    return 2;
  }
  const std::string only = argc > 9 && std::string(argv[9]) != "all" ? argv[9] : "";
  const int witness_length = argc > 10 ? std::atoi(argv[10]) : kv::kDefaultWitnessLength;
  const int P = std::atoi(argv[4]), trials = std::atoi(argv[5]);
  const uint64_t seed = std::strtoull(argv[6], nullptr, 10);
  const int threads = argc > 7 ? std::atoi(argv[7]) : 1;
  const int reps = argc > 8 ? std::max(1, std::atoi(argv[8])) : 5;  // clean prefill/check repetitions
  auto m = model::Model::load(argv[1]);
  auto derived = model::Model::load(argv[2]);
  auto tok = tok::Tokenizer::from_gguf(m->file());
  model::Engine e(m, {threads, true}), ed(derived, {threads, true});
  std::ifstream in(argv[3]);
  std::stringstream ss;
  ss << in.rdbuf();
  std::vector<int32_t> all = tok->encode(ss.str(), true);
  while (int(all.size()) < 2 * P + 17) all.insert(all.end(), all.begin() + 1, all.end());
  const std::vector<int32_t> a(all.begin(), all.begin() + P);
  std::vector<int32_t> b(all.begin() + P, all.begin() + 2 * P);
  b[0] = a[0];
  const Prefill clean = prefill(e, a, std::vector<int32_t>(all.begin() + P, all.begin() + P + 16), witness_length);
  const Prefill other = prefill(e, b, std::vector<int32_t>(all.begin() + 2 * P, all.begin() + 2 * P + 16), witness_length);
  std::fprintf(stderr, "# prefill of %d tokens: %.1f s; witness tokens match the text's first: %s\n", P,
               clean.seconds, clean.m.proof.witness_tokens[0] == clean.text[0] ? "yes" : "no");
  model::KvCache derived_cache = ed.new_cache(P);
  ed.forward(derived_cache, a);

  std::mt19937_64 rng(seed);
  auto uniform = [&](int n) { return int(rng() % uint64_t(n)); };
  const int blocks = P / 16;
  const char* classes[] = {"flip", "swap", "other-prompt", "derived-model", "q4_0", "truncated-tail"};
  for (const char* cls : classes) {
    if (!only.empty() && ("," + only + ",").find("," + std::string(cls) + ",") == std::string::npos) continue;
    // [ground truth: greedy, text][check: rows, rows + witness][K index]
    int changed[2] = {0, 0}, detected[2][2][4] = {}, unchanged_flagged = 0, witness_layer_right = 0, witness_named = 0;
    int text_missed_k4[2] = {0, 0};  // flips that change the text and escape K = 4 + witness: [in K, in V]
    const auto t_class = Clock::now();
    for (int t = 0; t < trials; ++t) {
      model::KvCache bad = clean.cache.copy();
      bool flip_in_v = false;
      const std::string c = cls;
      // A run of 16..256 positions on a 16-block boundary, for the row-substitution classes.
      const int run = 16 * (1 + uniform(16));
      const int r0 = 16 * uniform(std::max(1, blocks - run / 16 + 1)), r1 = std::min(P, r0 + run);
      if (c == "flip") {
        for (;;) {
          const int l = uniform(bad.n_layers), h = uniform(bad.n_kv_heads), p = uniform(P), d = uniform(bad.head_dim);
          flip_in_v = uniform(2) == 0;
          uint16_t* x = flip_in_v ? bad.v_row(l, h, p) + d : bad.k_row(l, h, p) + d;
          const uint16_t y = uint16_t(*x ^ (1u << uniform(16)));
          if ((y & 0x7c00) == 0x7c00) continue;  // a non-finite value: the readers refuse it
          *x = y;
          break;
        }
      } else if (c == "swap") {
        const int i = uniform(blocks);
        int j = uniform(blocks - 1);
        if (j >= i) ++j;
        for (int k = 0; k < 16; ++k) swap_rows(bad, 16 * i + k, 16 * j + k);
      } else if (c == "other-prompt") {
        copy_rows(other.cache, bad, r0, r1);
      } else if (c == "derived-model") {
        copy_rows(derived_cache, bad, r0, r1);
      } else if (c == "q4_0") {
        for (int l = 0; l < bad.n_layers; ++l)
          for (analysis::KvPart part : {analysis::KvPart::k, analysis::KvPart::v})
            analysis::quantize_kv_rows(bad, part, gguf::TensorType::Q4_0, analysis::KvRotation::none, l, r0, r1, true);
      } else {  // truncated-tail: the last 1..64 positions lost and padded back with zeros
        const int lost = 1 + uniform(64);
        for (int l = 0; l < bad.n_layers; ++l)
          for (int h = 0; h < bad.n_kv_heads; ++h)
            for (int p = P - lost; p < P; ++p) {
              std::fill_n(bad.k_row(l, h, p), bad.head_dim, uint16_t(0));
              std::fill_n(bad.v_row(l, h, p), bad.head_dim, uint16_t(0));
            }
      }
      bad.n_pos = P;
      // The witness run as the check runs it, the rows through the check without it; the ground
      // truths teacher-forced beside them.
      const kv::Witness w = kv::run_witness(e, bad, clean.m.proof.witness_tokens);
      int first_layer = -1;
      for (size_t l = 0; l < w.attention_sha256.size(); ++l)
        if (w.attention_sha256[l] != clean.m.proof.witness_attention_sha256[l]) {
          first_layer = int(l);
          break;
        }
      const bool witness_differs = first_layer >= 0 || w.logits_sha256 != clean.m.proof.witness_logits_sha256;
      const bool matters[2] = {changes(e, bad, clean.greedy, clean.greedy_logits),
                               changes(e, bad, clean.text, clean.text_logits)};
      const kv::SpotReport r = kv::spot_check(e, clean.rows, bad, 8, seed * 1000003 + uint64_t(t));
      const int ks[4] = {1, 2, 4, 8};
      for (int i = 0; i < 4; ++i) {
        const std::vector<int> sub = kv::spot_positions(P, ks[i], seed * 1000003 + uint64_t(t));
        bool rows = false;
        for (const kv::SpotPosition& sp : r.positions)
          if (sp.diff && std::find(sub.begin(), sub.end(), sp.position) != sub.end()) rows = true;
        rows = rows || r.logits == "differs" || !r.resume_ok;  // the last position is in every K
        for (int g = 0; g < 2; ++g) {
          if (matters[g] && rows) ++detected[g][0][i];
          if (matters[g] && (rows || witness_differs)) ++detected[g][1][i];
        }
        if (!matters[0] && !matters[1] && (rows || witness_differs) && i == 3) ++unchanged_flagged;
        if (i == 2 && matters[1] && !(rows || witness_differs) && std::string(cls) == "flip") ++text_missed_k4[flip_in_v];
      }
      for (int g = 0; g < 2; ++g) changed[g] += matters[g];
      // A flip is in one layer: the witness must name it.
      if (std::string(cls) == "flip" && first_layer >= 0) {
        ++witness_named;
        const int l = first_layer;
        const size_t row_bytes = 2 * size_t(bad.head_dim);
        bool in_layer = false;
        for (int h = 0; h < bad.n_kv_heads && !in_layer; ++h)
          for (int p = 0; p < P && !in_layer; ++p)
            in_layer = std::memcmp(bad.k_row(l, h, p), clean.cache.k_row(l, h, p), row_bytes) != 0 ||
                       std::memcmp(bad.v_row(l, h, p), clean.cache.v_row(l, h, p), row_bytes) != 0;
        witness_layer_right += in_layer;
      }
      if ((t + 1) % 50 == 0)
        std::fprintf(stderr, "# %s: %d/%d trials, %.0f s\n", cls, t + 1, trials, seconds_since(t_class));
    }
    auto ks_json = [](const int* d) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "{\"1\":%d,\"2\":%d,\"4\":%d,\"8\":%d}", d[0], d[1], d[2], d[3]);
      return std::string(buf);
    };
    std::printf("{\"class\":\"%s\",\"trials\":%d,\"seconds\":%.1f,"
                "\"greedy\":{\"changed\":%d,\"rows\":%s,\"rows_witness\":%s},"
                "\"text\":{\"changed\":%d,\"rows\":%s,\"rows_witness\":%s},"
                "\"flagged_without_change_k8\":%d,\"witness_layer_named\":%d,\"witness_layer_right\":%d,"
                "\"text_missed_k4\":{\"k\":%d,\"v\":%d}}\n",
                cls, trials, seconds_since(t_class), changed[0], ks_json(detected[0][0]).c_str(),
                ks_json(detected[0][1]).c_str(), changed[1], ks_json(detected[1][0]).c_str(),
                ks_json(detected[1][1]).c_str(), unchanged_flagged, witness_named, witness_layer_right,
                text_missed_k4[0], text_missed_k4[1]);
    std::fflush(stdout);
  }
  // Clean caches: false alarms and the check's cost against the prefill, alternated.
  int alarms = 0;
  double spot_s[4] = {0, 0, 0, 0}, rows_s[4] = {0, 0, 0, 0}, prefill_s = 0;
  for (int rep = 0; rep < reps; ++rep) {
    model::KvCache c = e.new_cache(P);
    const auto t = Clock::now();
    e.forward(c, a);
    prefill_s += seconds_since(t);
    const int ks[4] = {1, 2, 4, 8};
    for (int i = 0; i < 4; ++i) {
      const auto t2 = Clock::now();
      const kv::SpotReport r = kv::spot_check(e, clean.m, c, ks[i], uint64_t(rep));
      spot_s[i] += seconds_since(t2);
      if (!r.ok() || r.witness != "ok") ++alarms;
      const auto t3 = Clock::now();
      const kv::SpotReport rr = kv::spot_check(e, clean.rows, c, ks[i], uint64_t(rep));
      rows_s[i] += seconds_since(t3);
      if (!rr.ok()) ++alarms;
    }
  }
  std::printf("{\"clean\":{\"simd\":\"%s\",\"threads\":%d,\"P\":%d,\"checks\":%d,\"false_alarms\":%d,"
              "\"prefill_s\":%.6f,\"cost\":{\"1\":%.5f,\"2\":%.5f,\"4\":%.5f,\"8\":%.5f},"
              "\"cost_rows_only\":{\"1\":%.5f,\"2\":%.5f,\"4\":%.5f,\"8\":%.5f}}}\n",
              simd_name(active_simd()), threads, P, 8 * reps, alarms, prefill_s / reps, spot_s[0] / prefill_s,
              spot_s[1] / prefill_s, spot_s[2] / prefill_s, spot_s[3] / prefill_s, rows_s[0] / prefill_s,
              rows_s[1] / prefill_s, rows_s[2] / prefill_s, rows_s[3] / prefill_s);
  return 0;
}
