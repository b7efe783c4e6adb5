#include "map/sweep.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <limits>
#include <filesystem>
#include <map>
#include <set>

#include "kv/state.h"
#include "map/anchor.h"
#include "map/collect.h"
#include "map/mapper.h"
#include "map/metrics.h"
#include "map/shared.h"
#include "map/target_coords.h"
#include "model/engine.h"
#include "tokenizer/tokenizer.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/open_file.h"
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

std::string fmt3(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", v);
  return b;
}

// The median of a few timings (the mean of the middle two when even): what a run typically
// takes, which a minimum over a shared machine's runs is not.
double median(std::vector<double> v) {
  EMBER_CHECK(!v.empty());
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

std::string fmte(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3e", v);
  return b;
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
  // The anchors swept (checked before any work is done).
  std::vector<int> anchors = o.anchors;
  if (anchors.empty())
    for (int a = s; a <= L; ++a) anchors.push_back(a);
  std::sort(anchors.begin(), anchors.end());
  anchors.erase(std::unique(anchors.begin(), anchors.end()), anchors.end());
  for (int a : anchors)
    if (a < s || a > L)
      fail_field(where, "--anchors", "each in [s, L] = [" + std::to_string(s) + ", " + std::to_string(L) + "]",
                 std::to_string(a));

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
  // The budget's prompts: the first budget_prompts calibration prompts. Withheld from the fit
  // (the fit's split puts them on its evaluation side, so the fit gate refuses them) unless
  // budget_in_sample: a mapper judged on the prompts it was fitted on looks far better than
  // it is when the calibration set is small (sweep_budget.h).
  PromptSplit fit_split = split;
  std::vector<std::string> budget_hashes;
  if (o.budget.active()) {
    if (o.budget_prompts < 1) fail_field(where, "--budget-prompts", ">= 1", std::to_string(o.budget_prompts));
    const size_t nb = std::min(split.calib.size(), size_t(o.budget_prompts));
    budget_hashes.assign(split.calib.begin(), split.calib.begin() + std::ptrdiff_t(nb));
    if (!o.budget_in_sample) {
      if (size_t(o.budget_prompts) >= split.calib.size())
        fail_field(where, "--budget-prompts", "fewer than the " + std::to_string(split.calib.size()) +
                                                  " calibration prompts (the rest fit the mapper)",
                   std::to_string(o.budget_prompts));
      fit_split.calib.assign(split.calib.begin() + std::ptrdiff_t(nb), split.calib.end());
      fit_split.eval = budget_hashes;
      fit_split.eval.insert(fit_split.eval.end(), split.eval.begin(), split.eval.end());
    }
  }
  CollectOptions co;
  co.threads = o.threads;
  co.progress_label = "sweep collect";
  const CalibrationSet calib = collect_calibration(src, src_model->identity(), tgt, tgt_model->identity(),
                                                   prompts, fit_split, src_tok->identity(), s, co);
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
                    {"fit_split_hash", fit_split.hash()},
                    {"fit_prompts", fit_split.calib.size()},
                    {"calib_prompts", o.n_calib},
                    {"eval_prompts", o.n_eval},
                    {"mapper", {{"kind", o.kind}, {"anchor_identity", mo.anchor_identity},
                                {"lambda", o.lambda}, {"hash", mapper.hash()},
                                {"mean_eval_r2_per_layer", r2}, {"residual_maps", rr}}},
                    {"engine", src.fingerprint()},
                    {"threads", o.threads}};

  // Rows: identity reuse, then the anchors (default a = s .. L), then the full target prefill
  // (the reference).
  struct Config {
    std::string name;
    const Mapper* mapper;
    int a;
  };
  std::vector<Config> configs;
  configs.push_back({"identity-reuse", &identity, L});
  for (int a : anchors) configs.push_back({"anchor", a > s ? &mapper : nullptr, a});
  std::vector<SweepRow> rows(configs.size() + 1);
  double full_ttft = 0;
  std::map<std::string, const std::vector<int32_t>*> by_hash;
  for (const auto& p : prompts) by_hash[prompt_hash(p)] = &p;
  const int repeats = std::max(1, o.timing_repeats);
  const int G = src.config().n_kv_heads, D = src.config().head_dim, E = src.config().n_embd;

  // The source's prefill of a prompt's prefix: its cache, its residual entering every layer
  // boundary, the boundary logits, and (over the repeats, median) the seconds from the start
  // at which the residual reached each boundary (on_residual fires before the layer runs).
  struct SourceRun {
    model::KvCache cache;
    std::vector<std::vector<float>> residual;  // [boundary 0..L][n][E]
    std::vector<float> logits;
    std::vector<double> seconds_to;            // [boundary 0..L]
  };
  auto source_prefill = [&](std::span<const int32_t> prefix, int cap, int reps) {
    SourceRun run;
    std::vector<std::vector<double>> times(size_t(L + 1));
    for (int r = 0; r < reps; ++r) {
      std::vector<std::vector<float>> residual(size_t(L + 1));
      std::vector<double> t(size_t(L + 1), 0.0);
      model::ForwardHooks hooks;
      const auto t0 = Clock::now();
      hooks.on_residual = [&](int b, int, int n, const float* x) {
        t[size_t(b)] = std::chrono::duration<double>(Clock::now() - t0).count();
        residual[size_t(b)].assign(x, x + size_t(n) * E);
      };
      model::KvCache c = src.new_cache(cap);
      std::vector<float> logits = src.forward(c, prefix, &hooks);
      for (int b = 0; b <= L; ++b) times[size_t(b)].push_back(t[size_t(b)]);
      run.cache = std::move(c);
      run.residual = std::move(residual);
      run.logits = std::move(logits);
    }
    for (int b = 0; b <= L; ++b) run.seconds_to.push_back(median(times[size_t(b)]));
    return run;
  };

  // The target's full prefill of a whole prompt (the reference): median seconds over the
  // repeats, its logits and cache.
  auto full_prefill = [&](const std::vector<int32_t>& p, int cap, std::vector<float>& logits, model::KvCache& cache) {
    std::vector<double> t;
    for (int r = 0; r < repeats; ++r) {
      const auto t0 = Clock::now();
      model::KvCache c = tgt.new_cache(cap);
      std::vector<float> l = tgt.forward(c, p);
      t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      logits = std::move(l);
      cache = std::move(c);
    }
    return median(t);
  };

  // One configuration's handoff and first decode: median seconds over the repeats, its logits
  // and cache (the same bits every repeat).
  auto handoff = [&](const Config& cf, const SourceRun& sr, std::span<const int32_t> prefix, int32_t last, int cap,
                     std::vector<float>& logits, model::KvCache& cache, AnchorReport& report) {
    std::vector<double> t;
    for (int r = 0; r < repeats; ++r) {
      const auto t0 = Clock::now();
      model::KvCache c = anchor_handoff(tgt, src.config(), cf.mapper, sr.cache, prefix,
                                        cf.a < L ? sr.residual[size_t(cf.a)].data() : nullptr, s, cf.a, cap, &report);
      std::vector<float> l = tgt.forward(c, std::span<const int32_t>(&last, 1));
      t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      logits = std::move(l);
      cache = std::move(c);
    }
    return median(t);
  };

  // The stored source state: written once (untimed), read back (timed, median over the
  // repeats), removed. Returns {snapshot seconds, residual seconds}.
  const bool stored = !o.work_dir.empty();
  if (o.budget.active() && o.ttft_case == TtftCase::stored && !stored)
    fail_field(where, "--ttft-case", "handoff or with-source when the stored state is not timed", "stored");
  auto stored_load = [&](const std::string& base, std::span<const int32_t> prefix, const SourceRun& sr) {
    const int n = int(prefix.size());
    kv::KvState st;
    kv::SnapshotManifest& m = st.manifest;
    m = target_coordinates(src, src_tok->identity());
    m.prefix.tokens.assign(prefix.begin(), prefix.end());
    m.resume.token = first_argmax(sr.logits.data(), int(sr.logits.size()));
    m.resume.position = n;
    st.cache = sr.cache.copy_rows(n);
    kv::write_state_dir(kv::seal(std::move(st), where), base + ".snapshot", true);
    const std::vector<float>& rows_at_s = sr.residual[size_t(s)];  // every boundary's rows have this size
    write_file_atomic(base + ".residual.f32",
                      std::string_view(reinterpret_cast<const char*>(rows_at_s.data()), rows_at_s.size() * sizeof(float)), true);
    std::vector<double> snap, resid;
    for (int r = 0; r < repeats; ++r) {
      const auto t0 = Clock::now();
      const kv::VerifiedState sd = kv::read_state_dir(base + ".snapshot");
      const auto t1 = Clock::now();
      uint64_t size = 0;
      const int fd = open_regular_file(base + ".residual.f32", &size);
      const std::string bytes = read_all_and_close(fd, size, base + ".residual.f32");
      const auto t2 = Clock::now();
      if (sd.cache().n_pos != n || bytes.size() != rows_at_s.size() * sizeof(float))
        fail(where, "the stored source state read back differs in size from what was written");
      snap.push_back(std::chrono::duration<double>(t1 - t0).count());
      resid.push_back(std::chrono::duration<double>(t2 - t1).count());
    }
    std::error_code ec;
    std::filesystem::remove_all(base + ".snapshot", ec);
    std::filesystem::remove(base + ".residual.f32", ec);
    return std::pair<double, double>{median(snap), median(resid)};
  };
  // What a configuration adds to its handoff in the two other cases: the source's prefill up
  // to the boundary it reads (K/V of layers [0, a), the residual at a), or loading them.
  auto source_seconds = [&](const Config& cf, const SourceRun& sr) { return cf.a == 0 ? 0.0 : sr.seconds_to[size_t(cf.a)]; };
  auto load_seconds = [&](const Config& cf, std::pair<double, double> load) {
    return (cf.a > 0 ? load.first : 0.0) + (cf.a > 0 && cf.a < L ? load.second : 0.0);
  };

  // The choice: every configuration's fidelity and TTFT on the first budget_prompts calibration
  // prompts, beside the target's full prefill timed the same way in the same run.
  std::vector<BudgetCandidate> candidates;
  double budget_full = 0;
  if (o.budget.active()) {
    candidates.resize(configs.size() + 1);
    Progress progress("sweep: budget", int64_t(budget_hashes.size()), "prompts");
    int budget_index = 0;
    for (const std::string& bh : budget_hashes) {
      const std::vector<int32_t>& p = *by_hash.at(bh);
      const int P = int(p.size());
      std::vector<float> ref;
      model::KvCache ref_cache;
      const double full_seconds = full_prefill(p, P + 1, ref, ref_cache);
      budget_full += full_seconds;
      const std::span<const int32_t> prefix(p.data(), size_t(P - 1));
      const SourceRun sr = source_prefill(prefix, P, repeats);
      const std::pair<double, double> load =
          stored ? stored_load(o.work_dir + "/budget-" + std::to_string(budget_index), prefix, sr) : std::pair{0.0, 0.0};
      const int32_t last = p[size_t(P - 1)];
      for (size_t ci = 0; ci < configs.size(); ++ci) {
        const Config& cf = configs[ci];
        AnchorReport report;
        std::vector<float> l;
        model::KvCache c;
        const double t = handoff(cf, sr, prefix, last, P + 1, l, c, report);
        const LogitComparison cmp = compare_logits(l.data(), ref.data(), int(ref.size()));
        BudgetCandidate& bc = candidates[ci];
        bc.config = cf.name;
        bc.a = cf.a;
        bc.work_saved = report.prefill_work_saved();
        bc.mapping_macs = report.mapping_macs_per_token;
        ++bc.comparisons;
        bc.agree += cmp.same_argmax;
        bc.sum_kl += cmp.kl;
        bc.sum_rel += cmp.rel_l2;
        bc.ttft_handoff += t;
        bc.ttft_with_source += source_seconds(cf, sr) + t;
        bc.ttft_stored += load_seconds(cf, load) + t;
      }
      BudgetCandidate& full = candidates.back();
      full.config = "full-prefill";
      full.a = 0;
      ++full.comparisons;
      ++full.agree;
      full.ttft_handoff += full_seconds;
      full.ttft_with_source += full_seconds;
      full.ttft_stored += full_seconds;
      ++budget_index;
      progress.step();
    }
  }

  Progress progress("sweep eval", int64_t(split.eval.size()), "prompts");
  int prompt_index = 0;
  for (const std::string& h : split.eval) {
    const std::vector<int32_t>& p = *by_hash.at(h);
    const int P = int(p.size());
    const int cap = P + o.greedy_steps + 1;
    // Reference: the target's full prefill (timed) and its greedy continuation.
    std::vector<float> ref;
    model::KvCache ref_cache;
    full_ttft += full_prefill(p, cap, ref, ref_cache);
    const std::vector<int32_t> ref_seq = greedy(tgt, ref_cache, ref, o.greedy_steps);

    const std::span<const int32_t> prefix(p.data(), size_t(P - 1));
    const SourceRun sr = source_prefill(prefix, P, repeats);
    const int32_t last = p[size_t(P - 1)];
    const double n_prefix = double(P - 1);
    const std::pair<double, double> load =
        stored ? stored_load(o.work_dir + "/source-" + std::to_string(prompt_index), prefix, sr) : std::pair{0.0, 0.0};

    for (size_t ci = 0; ci < configs.size(); ++ci) {
      const Config& cf = configs[ci];
      std::vector<float> logits;
      model::KvCache cache;
      AnchorReport report;
      const double t_med = handoff(cf, sr, prefix, last, cap, logits, cache, report);
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
      row.ttft_seconds += t_med;
      const bool needs_residual = cf.a > 0 && cf.a < L;
      const double src_seconds = source_seconds(cf, sr);
      const double load_s = load_seconds(cf, load);
      row.source_prefill_seconds += src_seconds;
      row.load_seconds += load_s;
      row.ttft_with_source_seconds += src_seconds + t_med;
      row.ttft_stored_seconds += load_s + t_med;
      row.handoff_bytes += n_prefix * (double(cf.a) * G * D * 2 * 2 + (needs_residual ? double(E) * 4 : 0.0));
      const std::vector<int32_t> seq = greedy(tgt, cache, logits, o.greedy_steps);
      int match = 0;
      while (match < o.greedy_steps && seq[size_t(match)] == ref_seq[size_t(match)]) ++match;
      row.greedy_prefix_agreement += double(match) / o.greedy_steps;
      row.greedy_exact += match == o.greedy_steps;
    }
    ++prompt_index;
    progress.step();
  }
  progress.finish();
  res.provenance["anchors"] = anchors;
  SweepRow& full = rows.back();
  full.config = "full-prefill";
  full.comparisons = full.agree = full.bit_identical = full.greedy_exact = int64_t(split.eval.size());
  full.greedy_prefix_agreement = double(split.eval.size());
  full.ttft_seconds = full.ttft_with_source_seconds = full.ttft_stored_seconds = full_ttft;
  for (SweepRow& row : rows) {
    if (row.comparisons) {
      row.mean_rel_err /= double(row.comparisons);
      row.mean_kl /= double(row.comparisons);
      row.greedy_prefix_agreement /= double(row.comparisons);
    }
    row.ttft_ratio = full_ttft > 0 ? row.ttft_seconds / full_ttft : 0.0;
    row.ttft_with_source_ratio = full_ttft > 0 ? row.ttft_with_source_seconds / full_ttft : 0.0;
    row.ttft_stored_ratio = stored && full_ttft > 0 ? row.ttft_stored_seconds / full_ttft : 0.0;
    if (!stored) row.ttft_stored_seconds = 0;
  }
  res.stored_measured = stored;
  if (o.budget.active()) {
    const std::string judged_on =
        std::to_string(budget_hashes.size()) + (o.budget_in_sample ? " calibration prompts the mapper was fitted on (in sample)"
                                                                   : " calibration prompts withheld from the fit");
    res.choice = budget_choice(candidates, o.budget, o.ttft_case, budget_full, stored, judged_on, repeats, o.threads,
                               rows);
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
                   {"threads", options.threads},
                   {"ttft", "ttft_seconds: handoff + first decode (the source state already in memory), median of " +
                                std::to_string(options.timing_repeats) + " runs per prompt, summed over prompts"},
                   {"ttft_with_source",
                    "ttft_with_source_seconds: + the source's prefill of the prefix up to the boundary the handoff "
                    "reads (through layer a-1; all layers for a = L; nothing for a = 0), timed in the same source "
                    "prefill by the residual hook; the state moves in memory"},
                   {"ttft_stored",
                    stored_measured
                        ? "ttft_stored_seconds: + reading the source state from disk instead: kv::read_state_dir of "
                          "its ember.kv-snapshot.v1 (all layers, SHA-256 checked, warm page cache) when a > 0, plus "
                          "the f32 residual rows when 0 < a < L"
                        : "not measured (no work directory)"},
                   {"ratios", "each TTFT divided by the target's full prefill of the same prompts, measured in the same run"},
                   {"handoff_bytes", "K/V of layers [0, a) in f16 plus the f32 residual when 0 < a < L, summed over prompts"},
                   {"reference", "target full prefill of the whole prompt"}};
  if (!choice.is_null()) j["choice"] = choice;
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
                      {"prefill_work_saved", r.prefill_work_saved},
                      {"source_prefill_seconds", r.source_prefill_seconds}, {"load_seconds", r.load_seconds},
                      {"ttft_with_source_seconds", r.ttft_with_source_seconds},
                      {"ttft_with_source_ratio", r.ttft_with_source_ratio},
                      {"ttft_stored_seconds", stored_measured ? nlohmann::json(r.ttft_stored_seconds) : nlohmann::json()},
                      {"ttft_stored_ratio", stored_measured ? nlohmann::json(r.ttft_stored_ratio) : nlohmann::json()},
                      {"handoff_bytes", r.handoff_bytes}});
  j["rows"] = rows_j;
  return j;
}

std::string SweepResult::table() const {
  std::string out = "sweep (" + label + ", " + options.kind + " maps): s = " + std::to_string(provenance.value("shared_layers", 0)) +
                    " shared layers\n";
  char line[1024];
  std::snprintf(line, sizeof line, "%-16s %3s %10s %9s %14s %14s %11s %11s %11s %9s %10s %10s %10s %10s\n", "config",
                "a", "agreement", "bitexact", "mean rel err", "max rel err", "mean KL", "max KL", "greedy-pfx",
                "greedy=", "TTFT/full", "+src/full", "load/full", "work saved");
  out += line;
  for (const SweepRow& r : rows) {
    std::string name = r.config;
    if (r.pure_mapping) name = "pure-mapping";
    if (r.exact_hybrid) name = "exact-hybrid";
    std::snprintf(line, sizeof line,
                  "%-16s %3d %5lld/%-4lld %9lld %13.4e%% %13.4e%% %11.3e %11.3e %11.3f %4lld/%-4lld %10.3f %10.3f %10s %9.1f%%\n",
                  name.c_str(), r.a, (long long)r.agree, (long long)r.comparisons, (long long)r.bit_identical,
                  100 * r.mean_rel_err, 100 * r.max_rel_err, r.mean_kl, r.max_kl, r.greedy_prefix_agreement,
                  (long long)r.greedy_exact, (long long)r.comparisons, r.ttft_ratio, r.ttft_with_source_ratio,
                  stored_measured ? fmt3(r.ttft_stored_ratio).c_str() : "-", 100 * r.prefill_work_saved);
    out += line;
  }
  out += "TTFT/full: handoff + first decode; +src/full: plus the source's prefill up to the boundary; load/full: "
         "plus loading the stored source state instead (ratios to the target's full prefill, same run)\n";
  if (!choice.is_null()) {
    const nlohmann::json& ch = choice["chosen"];
    const nlohmann::json& ho = choice["held_out"];
    const nlohmann::json& ca = choice["calibration"];
    const bool st = !choice["candidates"].empty() && choice["candidates"][0]["ttft_stored_ratio"].is_number();
    std::snprintf(line, sizeof line, "budget candidates (%s; TTFT by %s, %s; target full prefill %.3f ms):\n",
                  choice["budget"].get<std::string>().c_str(), choice["ttft_case"].get<std::string>().c_str(),
                  choice["timing"].get<std::string>().c_str(), 1e3 * choice["full_prefill_seconds"].get<double>());
    out += line;
    std::snprintf(line, sizeof line, "  %-16s %3s %10s %11s %6s %10s %10s %10s\n", "config", "a", "agreement", "mean KL",
                  "meets", "TTFT/full", "+src/full", "load/full");
    out += line;
    for (const nlohmann::json& c : choice["candidates"]) {
      std::snprintf(line, sizeof line, "  %-16s %3d %10.3f %11.3e %6s %10.3f %10.3f %10s\n",
                    c["config"].get<std::string>().c_str(), c["a"].get<int>(), c["agreement"].get<double>(),
                    c["mean_kl"].get<double>(), c["meets_budget"].get<bool>() ? "yes" : "no",
                    c["ttft_ratio"].get<double>(), c["ttft_with_source_ratio"].get<double>(),
                    st ? fmt3(c["ttft_stored_ratio"].get<double>()).c_str() : "-");
      out += line;
    }
    std::string name = ch["config"].get<std::string>();
    if (name == "anchor") name += " a = " + std::to_string(ch["a"].get<int>());
    out += "choice (" + choice["budget"].get<std::string>() + ", on " + choice["judged_on"].get<std::string>() +
           "): " + name + "\n  " + choice["verdict"].get<std::string>() + "\n";
    std::snprintf(line, sizeof line,
                  "  calibration: agreement %s, mean KL %s, mean rel err %s\n"
                  "  held out: %lld/%lld agree, mean KL %.3e, mean rel err %.4e%%, TTFT/full %.3f, +src/full %.3f, "
                  "load/full %s, work saved %.1f%%\n",
                  ca.is_null() ? "-" : fmt3(ca["agreement"].get<double>()).c_str(),
                  ca.is_null() ? "-" : fmte(ca["mean_kl"].get<double>()).c_str(),
                  ca.is_null() ? "-" : fmte(ca["mean_rel_logit_error"].get<double>()).c_str(),
                  (long long)ho["agree"].get<int64_t>(), (long long)ho["comparisons"].get<int64_t>(),
                  ho["mean_kl"].get<double>(), 100 * ho["mean_rel_logit_error"].get<double>(),
                  ho["ttft_ratio_vs_full_prefill"].get<double>(), ho["ttft_with_source_ratio"].get<double>(),
                  ho["ttft_stored_ratio"].is_null() ? "-" : fmt3(ho["ttft_stored_ratio"].get<double>()).c_str(),
                  100 * ho["prefill_work_saved"].get<double>());
    out += line;
  }
  return out;
}

}  // namespace ember::map
