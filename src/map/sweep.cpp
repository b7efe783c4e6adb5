#include "map/sweep.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <set>

#include "map/anchor.h"
#include "map/collect.h"
#include "map/mapper.h"
#include "map/metrics.h"
#include "map/shared.h"
#include "model/engine.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/progress.h"

namespace ember::map {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(path, "cannot open the prompts file");
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) out.push_back(line);
    if (out.size() > 1000000) fail_field(path, "lines", "<= 1000000", "more");
  }
  return out;
}

std::string auto_label(const gguf::GgufFile& a, const gguf::GgufFile& b) {
  std::multiset<uint32_t> ta, tb;
  for (const auto& t : a.tensors()) ta.insert(uint32_t(t.type));
  for (const auto& t : b.tensors()) tb.insert(uint32_t(t.type));
  return ta != tb ? "quantization-boundary" : "cross-model";
}

// Greedy continuation of `steps` tokens from `logits` (the first selection) with `cache`.
std::vector<int32_t> greedy(model::Engine& e, model::KvCache& cache, std::vector<float> logits, int steps) {
  std::vector<int32_t> out;
  for (int i = 0; i < steps; ++i) {
    const int32_t t = first_argmax(logits.data(), int(logits.size()));
    out.push_back(t);
    if (i + 1 < steps) logits = e.forward(cache, std::span<const int32_t>(&t, 1));
  }
  return out;
}

}  // namespace

SweepResult run_sweep(const SweepOptions& o) {
  const std::string where = "study sweep";
  auto src_model = model::Model::load(o.source_path);
  auto tgt_model = model::Model::load(o.target_path);
  const auto load_tok = [&](const model::Model& m) {
    return o.tokenizer_path.empty() ? tok::Tokenizer::from_gguf(m.file()) : tok::Tokenizer::from_json_file(o.tokenizer_path);
  };
  auto src_tok = load_tok(*src_model);
  auto tgt_tok = load_tok(*tgt_model);
  if (src_tok->identity() != tgt_tok->identity())
    fail_field(where, "tokenizer identity", src_tok->identity() + " (the source's)", tgt_tok->identity());
  const SharedLayers shared = shared_layers(src_model->file(), src_model->config(),
                                            tgt_model->file(), tgt_model->config());
  const int s = shared.layers;
  model::Engine src({src_model}, {o.threads}), tgt({tgt_model}, {o.threads});
  const int L = tgt.config().n_layers;
  if (src.config().n_layers != L)
    fail_field(where, "target layers", std::to_string(src.config().n_layers) + " (as the source)", std::to_string(L));

  // Prompts, tokenized with the shared tokenizer (BOS as the model adds it), split frozen.
  std::vector<std::vector<int32_t>> given = o.prompts;
  if (given.empty())
    for (const std::string& line : read_lines(o.prompts_path)) given.push_back(src_tok->encode(line, src_tok->add_bos_default()));
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::string> hashes;
  for (auto& ids : given) {
    if (ids.size() < 2) continue;
    if (int(ids.size()) + o.greedy_steps + 1 > src.config().n_ctx && src.config().n_ctx > 0) continue;
    hashes.push_back(prompt_hash(ids));
    prompts.push_back(std::move(ids));
  }
  const PromptSplit split = PromptSplit::make(hashes, o.n_calib, o.n_eval, o.seed);
  if (o.kind != "affine" && o.kind != "ridge") fail_field(where, "kind", "affine or ridge", o.kind);
  CollectOptions co;
  co.threads = o.threads;
  co.progress_label = "sweep collect";
  const CalibrationSet calib = collect_calibration(src, src_model->identity(), tgt, tgt_model->identity(),
                                                   prompts, split, src_tok->identity(), s, co);
  MapperOptions mo;
  mo.kind = parse_mapper_kind(o.kind, where);
  mo.lambda = o.lambda;
  mo.anchor_identity = o.kind == "affine" && src.config().head_dim == tgt.config().head_dim;
  mo.residual_maps = true;
  mo.threads = o.threads;
  mo.progress_label = "sweep fit";
  const Mapper mapper = fit_mapper(calib, mo);
  const Mapper identity = identity_mapper(calib.source, calib.target, calib.tokenizer_identity, s);

  SweepResult res;
  res.options = o;
  res.label = o.label.empty() ? auto_label(src_model->file(), tgt_model->file()) : o.label;
  nlohmann::json r2 = nlohmann::json::array();
  for (int l = 0; l < L; ++l) {
    double k = 0, v = 0;
    for (int h = 0; h < tgt.config().n_kv_heads; ++h) {
      k += mapper.head(l, h).k_r2_eval;
      v += mapper.head(l, h).v_r2_eval;
    }
    r2.push_back({{"layer", l}, {"k_r2_eval", k / tgt.config().n_kv_heads}, {"v_r2_eval", v / tgt.config().n_kv_heads}});
  }
  nlohmann::json rr = nlohmann::json::array();
  for (const auto& m : mapper.residual) rr.push_back({{"boundary", m.boundary}, {"r2_eval", m.r2_eval}});
  res.provenance = {{"source", {{"path", o.source_path}, {"identity", src_model->identity()}}},
                    {"target", {{"path", o.target_path}, {"identity", tgt_model->identity()}}},
                    {"tokenizer_identity", src_tok->identity()},
                    {"shared_layers", s},
                    {"first_difference", shared.first_diff},
                    {"calibration_split_hash", split.hash()},
                    {"calib_prompts", o.n_calib},
                    {"eval_prompts", o.n_eval},
                    {"mapper", {{"kind", o.kind}, {"anchor_identity", mo.anchor_identity},
                                {"lambda", o.lambda}, {"hash", mapper.hash()},
                                {"mean_eval_r2_per_layer", r2}, {"residual_maps", rr}}},
                    {"engine", src.fingerprint()},
                    {"threads", o.threads}};

  // Rows: identity reuse, then a = s .. L, then the full target prefill (the reference).
  struct Config {
    std::string name;
    const Mapper* mapper;
    int a;
  };
  std::vector<Config> configs;
  configs.push_back({"identity-reuse", &identity, L});
  for (int a = s; a <= L; ++a) configs.push_back({"anchor", a > s ? &mapper : nullptr, a});
  std::vector<SweepRow> rows(configs.size() + 1);
  double full_ttft = 0;
  std::map<std::string, const std::vector<int32_t>*> by_hash;
  for (const auto& p : prompts) by_hash[prompt_hash(p)] = &p;

  Progress progress("sweep eval", int64_t(split.eval.size()), "prompts");
  for (const std::string& h : split.eval) {
    const std::vector<int32_t>& p = *by_hash.at(h);
    const int P = int(p.size());
    const int cap = P + o.greedy_steps + 1;
    // Reference: the target's full prefill (timed) and its greedy continuation.
    double best = std::numeric_limits<double>::infinity();
    std::vector<float> ref;
    model::KvCache ref_cache;
    for (int r = 0; r < std::max(1, o.timing_repeats); ++r) {
      const auto t0 = Clock::now();
      model::KvCache c = tgt.new_cache(cap);
      std::vector<float> l = tgt.forward(c, p);
      best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
      ref = std::move(l);
      ref_cache = std::move(c);
    }
    full_ttft += best;
    const std::vector<int32_t> ref_seq = greedy(tgt, ref_cache, ref, o.greedy_steps);

    const std::span<const int32_t> prefix(p.data(), size_t(P - 1));
    std::vector<std::vector<float>> residual(size_t(L + 1));
    model::ForwardHooks hooks;
    hooks.on_residual = [&](int b, int, int n, const float* x) {
      residual[size_t(b)].assign(x, x + size_t(n) * src.config().n_embd);
    };
    model::KvCache src_cache = src.new_cache(P);
    src.forward(src_cache, prefix, &hooks);
    const int32_t last = p[size_t(P - 1)];

    for (size_t ci = 0; ci < configs.size(); ++ci) {
      const Config& cf = configs[ci];
      double t_best = std::numeric_limits<double>::infinity();
      std::vector<float> logits;
      model::KvCache cache;
      AnchorReport report;
      for (int r = 0; r < std::max(1, o.timing_repeats); ++r) {
        const auto t0 = Clock::now();
        model::KvCache c = anchor_handoff(tgt, src.config(), cf.mapper, src_cache, prefix,
                                          cf.a < L ? residual[size_t(cf.a)].data() : nullptr,
                                          s, cf.a, cap, &report);
        std::vector<float> l = tgt.forward(c, std::span<const int32_t>(&last, 1));
        t_best = std::min(t_best, std::chrono::duration<double>(Clock::now() - t0).count());
        logits = std::move(l);
        cache = std::move(c);
      }
      SweepRow& row = rows[ci];
      row.config = cf.name;
      row.s = s;
      row.a = cf.a;
      row.pure_mapping = cf.name == "anchor" && cf.a == L && L > s;
      row.exact_hybrid = cf.name == "anchor" && cf.a == s;
      row.prefill_work_saved = report.prefill_work_saved();
      const LogitComparison cmp = compare_logits(logits.data(), ref.data(), int(ref.size()));
      ++row.comparisons;
      row.agree += cmp.same_argmax;
      row.bit_identical += cmp.bit_identical;
      row.mean_rel_err += cmp.rel_l2;
      row.max_rel_err = std::max(row.max_rel_err, cmp.rel_l2);
      row.mean_kl += cmp.kl;
      if (!(cmp.kl <= row.max_kl)) row.max_kl = cmp.kl;  // a NaN propagates
      row.ttft_seconds += t_best;
      const std::vector<int32_t> seq = greedy(tgt, cache, logits, o.greedy_steps);
      int match = 0;
      while (match < o.greedy_steps && seq[size_t(match)] == ref_seq[size_t(match)]) ++match;
      row.greedy_prefix_agreement += double(match) / o.greedy_steps;
      row.greedy_exact += match == o.greedy_steps;
    }
    progress.step();
  }
  progress.finish();
  SweepRow& full = rows.back();
  full.config = "full-prefill";
  full.comparisons = full.agree = full.bit_identical = full.greedy_exact = int64_t(split.eval.size());
  full.greedy_prefix_agreement = double(split.eval.size());
  full.ttft_seconds = full_ttft;
  for (SweepRow& row : rows) {
    if (row.comparisons) {
      row.mean_rel_err /= double(row.comparisons);
      row.mean_kl /= double(row.comparisons);
      row.greedy_prefix_agreement /= double(row.comparisons);
    }
    row.ttft_ratio = full_ttft > 0 ? row.ttft_seconds / full_ttft : 0.0;
  }
  res.rows = std::move(rows);
  return res;
}

nlohmann::json SweepResult::to_json() const {
  nlohmann::json j;
  j["study"] = "sweep";
  j["label"] = label;
  j["kind"] = options.kind;  // the mapper family fitted: affine (L2 anchor toward identity) or ridge
  j["note"] = label == "quantization-boundary"
                  ? "source and target are one model at two weight precisions: a quantization-boundary "
                    "study, not a cross-model result"
                  : label == "same-base"
                        ? "source and target are different models sharing a base (lower layers byte for byte) and a tokenizer"
                        : "source and target are different models sharing a tokenizer";
  j["protocol"] = {{"decode", "the last prompt token, then greedy"},
                   {"greedy_steps", options.greedy_steps},
                   {"ttft", "handoff + first decode (source prefill not counted), min of " +
                                std::to_string(options.timing_repeats) + " runs per prompt, summed"},
                   {"reference", "target full prefill of the whole prompt"}};
  j["provenance"] = provenance;
  nlohmann::json rows_j = nlohmann::json::array();
  for (const SweepRow& r : rows)
    rows_j.push_back({{"config", r.config}, {"s", r.s}, {"a", r.a},
                      {"pure_mapping", r.pure_mapping}, {"exact_hybrid", r.exact_hybrid},
                      {"comparisons", r.comparisons}, {"agree", r.agree},
                      {"agreement", r.comparisons ? double(r.agree) / double(r.comparisons) : 0.0},
                      {"bit_identical", r.bit_identical},
                      {"mean_rel_logit_error", r.mean_rel_err}, {"max_rel_logit_error", r.max_rel_err},
                      {"mean_kl", r.mean_kl}, {"max_kl", r.max_kl},
                      {"greedy_prefix_agreement", r.greedy_prefix_agreement},
                      {"greedy_exact", r.greedy_exact},
                      {"ttft_seconds", r.ttft_seconds}, {"ttft_ratio_vs_full_prefill", r.ttft_ratio},
                      {"prefill_work_saved", r.prefill_work_saved}});
  j["rows"] = rows_j;
  return j;
}

std::string SweepResult::table() const {
  std::string out = "sweep (" + label + ", " + options.kind + " maps): s = " + std::to_string(provenance.value("shared_layers", 0)) +
                    " shared layers\n";
  char line[320];
  std::snprintf(line, sizeof line, "%-16s %3s %10s %9s %14s %14s %11s %11s %11s %9s %10s %10s\n", "config",
                "a", "agreement", "bitexact", "mean rel err", "max rel err", "mean KL", "max KL", "greedy-pfx",
                "greedy=", "TTFT/full", "work saved");
  out += line;
  for (const SweepRow& r : rows) {
    std::string name = r.config;
    if (r.pure_mapping) name = "pure-mapping";
    if (r.exact_hybrid) name = "exact-hybrid";
    std::snprintf(line, sizeof line,
                  "%-16s %3d %5lld/%-4lld %9lld %13.4e%% %13.4e%% %11.3e %11.3e %11.3f %4lld/%-4lld %10.3f %9.1f%%\n",
                  name.c_str(), r.a, (long long)r.agree, (long long)r.comparisons, (long long)r.bit_identical,
                  100 * r.mean_rel_err, 100 * r.max_rel_err, r.mean_kl, r.max_kl, r.greedy_prefix_agreement,
                  (long long)r.greedy_exact, (long long)r.comparisons, r.ttft_ratio, 100 * r.prefill_work_saved);
    out += line;
  }
  return out;
}

}  // namespace ember::map
