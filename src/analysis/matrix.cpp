#include "analysis/matrix.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>

#include "analysis/compare.h"
#include "analysis/compare_load.h"
#include "analysis/diagnostics.h"
#include "analysis/perturb.h"
#include "kv/replay.h"
#include "kv/state.h"
#include "model/config.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/printable.h"
#include "util/progress.h"
#include "util/thread_pool.h"

namespace ember::analysis {

namespace {

constexpr const char* kWhere = "--variants";
constexpr int kMaxVariants = 64, kMaxThreads = 256;

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t i = 0;
  while (true) {
    const size_t j = s.find(sep, i);
    out.push_back(s.substr(i, j == std::string::npos ? std::string::npos : j - i));
    if (j == std::string::npos) return out;
    i = j + 1;
  }
}

// "1-2-3" -> {1, 2, 3}; roles left out repeat the last one.
std::array<int, 3> parse_threads(const std::string& list, const std::string& field, const std::string& item) {
  const std::vector<std::string> parts = split(list, '-');
  const std::string expected = "t N[-N[-N]] with N in 1.." + std::to_string(kMaxThreads) +
                               " (threads of native, export, replay)";
  if (parts.size() > 3) fail_field(kWhere, field, expected, "'" + item + "'");
  std::array<int, 3> t{};
  for (size_t r = 0; r < 3; ++r) {
    const std::string& p = parts[std::min(r, parts.size() - 1)];
    if (p.empty() || p.size() > 3 || p.find_first_not_of("0123456789") != std::string::npos)
      fail_field(kWhere, field, expected, "'" + item + "'");
    t[r] = std::stoi(p);
    if (t[r] < 1 || t[r] > kMaxThreads) fail_field(kWhere, field, expected, "'" + item + "'");
  }
  return t;
}

std::array<std::optional<SimdLevel>, 3> parse_simd_list(const std::string& list, const std::string& field,
                                                        const std::string& item) {
  const std::vector<std::string> parts = split(list, '/');
  const std::string expected =
      "simd=P[/P[/P]] with P in scalar, avx2, avx512, avx512vnni, default (paths of native, export, replay)";
  if (parts.size() > 3) fail_field(kWhere, field, expected, "'" + item + "'");
  std::array<std::optional<SimdLevel>, 3> s{};
  for (size_t r = 0; r < 3; ++r) {
    const std::string& p = parts[std::min(r, parts.size() - 1)];
    if (p == "default") continue;
    if (p != "scalar" && p != "avx2" && p != "avx512" && p != "avx512vnni")
      fail_field(kWhere, field, expected, "'" + item + "'");
    s[r] = parse_simd(p);
  }
  return s;
}

uint64_t head_mismatches(const HeadMetrics& h) { return h.k.mismatches + h.v.mismatches; }

// Self-compare: every metric of every (layer, head, part) exact.
MatrixSelf self_compare(const ComparedState& left, ThreadPool* pool) {
  CompareOptions o;
  o.r2 = true;
  const CompareReport r = compare_states(left, left, o, pool);
  MatrixSelf s;
  s.min_cosine = 1;
  bool exact = r.metrics.identical();
  for (const HeadMetrics& h : r.metrics.heads) {
    for (const PartMetrics* p : {&h.k, &h.v}) {
      s.mismatches += p->mismatches;
      if (!p->cosine || !p->mse || !p->max_abs) {
        exact = false;
        continue;
      }
      s.min_cosine = std::min(s.min_cosine, *p->cosine);
      s.max_mse = std::max(s.max_mse, *p->mse);
      s.max_abs = std::max(s.max_abs, *p->max_abs);
      if (p->r2) s.min_r2 = s.min_r2 ? std::min(*s.min_r2, *p->r2) : *p->r2;
    }
  }
  s.exact = exact && s.mismatches == 0 && s.min_cosine == 1 && s.max_mse == 0 && s.max_abs == 0 &&
            (!s.min_r2 || *s.min_r2 == 1);
  return s;
}

// The zeroing control: receipted, applied in memory, compared and diagnosed.
MatrixControl zeroing_control(const ComparedState& left, model::Engine& engine, const MatrixOptions& o,
                              ThreadPool* pool, const std::string& keep_receipt) {
  PerturbSpec spec;
  spec.layer = o.control_layer;
  spec.head = o.control_head;
  spec.part = PerturbPart::kv;
  spec.zero = true;
  const PerturbReceipt receipt = make_receipt(left, spec);
  if (!keep_receipt.empty()) write_receipt(keep_receipt, receipt, true);
  ComparedState source{left.identity, left.coords, left.cache.copy()};
  const PerturbedState edited = apply_perturbation(std::move(source), receipt);
  const CompareReport r = compare_states(left, edited, CompareOptions{}, pool);
  MatrixControl c;
  c.operation = describe_operation(spec);
  c.receipt_sha256 = edited.receipt_sha256();
  c.changed_k = receipt.changed_k;
  c.changed_v = receipt.changed_v;
  for (int l = 0; l < r.metrics.n_layers; ++l)
    for (int h = 0; h < r.metrics.n_kv_heads; ++h) {
      const HeadMetrics& m = r.metrics.at(l, h);
      if (l == spec.layer && h == spec.head) {
        c.mismatches_at_target = head_mismatches(m);
        c.cosine_k = m.k.cosine.value_or(0);
        c.cosine_v = m.v.cosine.value_or(0);
      } else {
        c.mismatches_elsewhere += head_mismatches(m);
      }
    }
  const Diagnostics d = run_diagnostics(engine, left, edited.state(), DiagnosticsOptions{o.control_steps});
  c.steps = d.steps;
  c.top1_agreement = d.same_input.top1_agreement;
  if (!d.same_input.steps.empty()) {
    c.logits_max_abs = d.same_input.steps[0].logits.max_abs;
    c.logits_kl = d.same_input.steps[0].logits_kl;
  }
  c.detected = c.changed_k + c.changed_v > 0 && c.mismatches_at_target == c.changed_k + c.changed_v &&
               c.mismatches_elsewhere == 0 && c.logits_max_abs > 0;
  return c;
}

std::vector<uint8_t> bytes_of(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(float));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

void write_floats(const std::string& path, const std::vector<float>& v) {
  AtomicFile f(path, true);
  f.sink().write(v.data(), v.size() * sizeof(float));
  f.commit();
}

std::string stem_of(const std::string& path) { return std::filesystem::path(path).stem().string(); }

// The engines of one model, one per thread count (each holds its own pool).
class Engines {
 public:
  Engines(std::shared_ptr<const model::Model> m, bool past) : model_(std::move(m)), past_(past) {}
  model::Engine& get(int threads) {
    auto it = by_threads_.find(threads);
    if (it == by_threads_.end())
      it = by_threads_.emplace(threads, std::make_unique<model::Engine>(
                                            model_, model::EngineOptions{threads, past_})).first;
    return *it->second;
  }

 private:
  std::shared_ptr<const model::Model> model_;
  bool past_;
  std::map<int, std::unique_ptr<model::Engine>> by_threads_;
};

// OUT/cells/M-P-V (1-based model, prompt, variant).
std::string cell_dir(const MatrixOptions& o, const MatrixCell& c) {
  return o.out + "/cells/" + std::to_string(c.model_index + 1) + "-" + std::to_string(c.prompt_index + 1) + "-" +
         std::to_string(c.variant_index + 1);
}

void run_cell(MatrixCell& cell, const MatrixModel& mm, Engines& engines, const MatrixPrompt& prompt,
              const MatrixVariant& v, const MatrixOptions& o, SimdLevel default_simd) {
  namespace fs = std::filesystem;
  const std::string dir = cell_dir(o, cell);
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir);
  const auto role = [&](int r) -> model::Engine& {
    set_simd_override(v.simd[size_t(r)].value_or(default_simd));
    return engines.get(cell.threads[size_t(r)]);
  };
  const int N = o.steps;
  const int64_t P = int64_t(prompt.tokens.size());
  model::Engine& native_engine = role(0);
  if (P + N - 1 > native_engine.position_limit())
    fail_field("prompt " + printable(prompt.id), "tokens",
               "at most " + std::to_string(native_engine.position_limit() - N + 1) + " (the position limit " +
                   std::to_string(native_engine.position_limit()) + " less -n " + std::to_string(N) + " + 1)",
               std::to_string(P));
  kv::ContinueOptions native_opt;
  native_opt.steps = N;
  native_opt.keep_logits = true;
  const kv::Continuation native = kv::generate_native(native_engine, prompt.tokens, native_opt);

  kv::ExportResult exported = kv::export_prefix(role(1), mm.tokenizer_identity, prompt.tokens, o.producer);
  const std::string snap_dir = dir + "/snapshot";
  kv::write_state_dir(exported.snapshot, snap_dir, false);
  if (o.before_replay) o.before_replay(snap_dir);
  kv::VerifiedState loaded = kv::open_state(snap_dir);

  model::Engine& replay_engine = role(2);
  kv::ContinueOptions replay_opt;
  replay_opt.steps = N - 1;
  replay_opt.keep_logits = true;
  replay_opt.where = snap_dir;
  const kv::Continuation replayed = kv::replay(loaded, replay_engine, mm.tokenizer_identity, replay_opt);

  MatrixGate& g = cell.gate;
  g.prefix = loaded.manifest().geometry.positions;
  g.resume_token = loaded.manifest().resume.token;
  g.resume_position = loaded.manifest().resume.position;
  g.native_first = native.tokens.empty() ? -1 : native.tokens[0];
  g.verdict = kv::compare_replay_logits(bytes_of(native.logits), bytes_of(exported.boundary_logits),
                                    bytes_of(replayed.logits), N);
  g.pass = g.verdict.pass && g.native_first == g.resume_token && g.resume_position == g.prefix &&
           g.prefix == P;
  if (o.keep) {
    write_floats(dir + "/native.f32", native.logits);
    write_floats(dir + "/boundary.f32", exported.boundary_logits);
    write_floats(dir + "/replay.f32", replayed.logits);
  }

  // The compare and the control run on the replay's engine (its threads and path).
  const ComparedState left = compared_from_state(std::move(loaded));
  ThreadPool pool(cell.threads[2]);
  cell.self = self_compare(left, &pool);
  cell.control = zeroing_control(left, replay_engine, o, &pool, o.keep ? dir + "/control-receipt.json" : "");

  if (!g.pass) {
    cell.status = "fail";
    if (!g.verdict.shape_error.empty()) {
      cell.reason = "gate: " + g.verdict.shape_error;
    } else if (g.verdict.first_mismatch) {
      const kv::LogitsMismatch& m = *g.verdict.first_mismatch;
      char buf[200];
      std::snprintf(buf, sizeof buf, "gate: %llu values differ; first at row %d (%s), token %d: 0x%08x vs 0x%08x",
                    static_cast<unsigned long long>(g.verdict.differing_values), m.row, m.source.c_str(), m.column,
                    m.native_bits, m.resumed_bits);
      cell.reason = buf;
    } else {
      cell.reason = "gate: native's first token " + std::to_string(g.native_first) + " is not the resume token " +
                    std::to_string(g.resume_token) + " at position " + std::to_string(g.resume_position);
    }
  } else if (!cell.self.exact) {
    cell.status = "fail";
    cell.reason = "self-compare: " + std::to_string(cell.self.mismatches) + " bit mismatches (not exact)";
  } else if (!cell.control.detected) {
    cell.status = "fail";
    cell.reason = "control not detected: " + cell.control.operation + " changed " +
                  std::to_string(cell.control.changed_k + cell.control.changed_v) + " elements, compare saw " +
                  std::to_string(cell.control.mismatches_at_target) + " at the head and " +
                  std::to_string(cell.control.mismatches_elsewhere) + " elsewhere, logits max |d| " +
                  std::to_string(cell.control.logits_max_abs);
  } else {
    cell.status = "pass";
  }
  if (o.keep) {
    cell.dir = dir;
  } else {
    fs::remove_all(dir, ec);
  }
}

}  // namespace

std::vector<std::string> MatrixVariant::missing_paths(SimdLevel best) const {
  std::vector<std::string> out;
  for (const auto& s : simd)
    if (s && int(*s) > int(best) && std::find(out.begin(), out.end(), simd_name(*s)) == out.end())
      out.push_back(simd_name(*s));
  return out;
}

std::vector<MatrixVariant> parse_variants(const std::string& spec) {
  std::vector<MatrixVariant> out;
  const std::vector<std::string> texts = split(spec, ';');
  if (texts.size() > size_t(kMaxVariants))
    fail_field(kWhere, "variants", "at most " + std::to_string(kMaxVariants), std::to_string(texts.size()));
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string text = trim(texts[i]);
    const std::string name = "variant " + std::to_string(i + 1);
    if (text.empty()) fail_field(kWhere, name, "t N[-N[-N]] and/or simd=P[/P[/P]]", "an empty variant");
    MatrixVariant v;
    v.spec = text;
    bool has_t = false, has_simd = false;
    for (const std::string& raw : split(text, ',')) {
      const std::string item = trim(raw);
      if (item.size() > 1 && item[0] == 't' && item[1] >= '0' && item[1] <= '9') {
        if (has_t) fail_field(kWhere, name + " threads", "one t item", "a second: '" + printable(item) + "'");
        has_t = true;
        v.threads = parse_threads(item.substr(1), name + " threads", printable(item));
      } else if (item.compare(0, 5, "simd=") == 0) {
        if (has_simd) fail_field(kWhere, name + " simd", "one simd item", "a second: '" + printable(item) + "'");
        has_simd = true;
        v.simd = parse_simd_list(item.substr(5), name + " simd", printable(item));
      } else {
        fail_field(kWhere, name + " item", "t N[-N[-N]] or simd=P[/P[/P]]", "'" + printable(item) + "'");
      }
    }
    for (const MatrixVariant& prev : out)
      if (prev.threads == v.threads && prev.simd == v.simd)
        fail_field(kWhere, name, "a variant not given before", "the same as '" + printable(prev.spec) + "'");
    out.push_back(std::move(v));
  }
  return out;
}

int MatrixReport::passed() const {
  return int(std::count_if(cells.begin(), cells.end(), [](const MatrixCell& c) { return c.status == "pass"; }));
}
int MatrixReport::failed() const {
  return int(std::count_if(cells.begin(), cells.end(), [](const MatrixCell& c) { return c.status == "fail"; }));
}
int MatrixReport::errors() const {
  return int(std::count_if(cells.begin(), cells.end(), [](const MatrixCell& c) { return c.status == "error"; }));
}
int MatrixReport::skipped() const {
  return int(std::count_if(cells.begin(), cells.end(), [](const MatrixCell& c) { return c.status == "skipped"; }));
}

int MatrixReport::prompt_count() const {
  int n = 0;
  for (const MatrixCell& c : cells)
    if (c.variant != "*") n = std::max(n, c.prompt_index + 1);
  return n;
}

MatrixReport run_matrix(const std::vector<std::string>& model_paths, const MatrixLoader& load,
                        const std::vector<MatrixVariant>& variants, const MatrixOptions& o) {
  if (o.steps < 2) fail_field("kv matrix", "-n", ">= 2 (one boundary row and at least one replay row)",
                              std::to_string(o.steps));
  if (o.threads < 1) fail_field("kv matrix", "threads", ">= 1", std::to_string(o.threads));
  if (o.control_steps < 1 || o.control_steps > 4096)
    fail_field("kv matrix", "control steps", "1..4096", std::to_string(o.control_steps));
  if (variants.empty()) fail_field("kv matrix", "--variants", "at least one variant", "none");
  if (model_paths.empty()) fail_field("kv matrix", "models", "at least one model", "none");
  const SimdLevel default_simd = active_simd();
  MatrixReport rep;
  rep.steps = o.steps;
  const SimdLevel ceiling = o.simd_ceiling.value_or(detect_simd());
  rep.cpu_simd = simd_name(ceiling);
  rep.default_simd = simd_name(default_simd);
  for (SimdLevel l : supported_simd_levels()) rep.supported_simd.push_back(simd_name(l));
  rep.variants = variants;
  for (const std::string& p : model_paths) rep.model_paths.push_back(printable(p));
  std::optional<Progress> progress;
  int64_t done = 0, per_model = 0, failed_models = 0;
  for (size_t mi = 0; mi < model_paths.size(); ++mi) {
    const std::string& path = model_paths[mi];
    MatrixCell base;
    base.model_index = int(mi);
    base.model_path = printable(path);
    base.model_name = printable(stem_of(path));
    MatrixModel mm;
    try {
      mm = load(path);
      if (mm.prompts.empty()) fail_field(path, "prompts", "at least one", "none");
    } catch (const Error& e) {
      MatrixCell c = base;
      c.prompt_id = "*";
      c.variant = "*";
      c.status = "error";
      c.reason = printable(e.what());
      rep.cells.push_back(std::move(c));
      ++failed_models;
      if (progress) progress->update(done += per_model);  // the cells it would have had
      continue;
    }
    if (!progress) {
      // Every model is given the same prompt file, so the first one that loads sets the count.
      per_model = int64_t(mm.prompts.size() * variants.size());
      progress.emplace("kv matrix", int64_t(model_paths.size()) * per_model, "cells");
      done = failed_models * per_model;
    }
    Engines engines(mm.model, o.allow_past_context);
    set_simd_override(default_simd);
    base.architecture = model::arch_name(mm.model->config().arch);
    base.weights = weights_of_fingerprint(engines.get(o.threads).fingerprint());
    base.model_identity = mm.model->identity();
    for (size_t pi = 0; pi < mm.prompts.size(); ++pi) {
      for (size_t vi = 0; vi < variants.size(); ++vi) {
        const MatrixVariant& v = variants[vi];
        MatrixCell c = base;
        c.prompt_index = int(pi);
        c.variant_index = int(vi);
        c.prompt_id = printable(mm.prompts[pi].id);
        c.prompt_tokens = int(mm.prompts[pi].tokens.size());
        c.variant = printable(v.spec);
        for (size_t r = 0; r < 3; ++r) {
          c.threads[r] = v.threads[r] > 0 ? v.threads[r] : o.threads;
          c.simd[r] = simd_name(v.simd[r].value_or(default_simd));
        }
        const auto start = std::chrono::steady_clock::now();
        const std::vector<std::string> missing = v.missing_paths(ceiling);
        if (!missing.empty()) {
          c.status = "skipped";
          std::string paths;
          for (const std::string& p : missing) paths += (paths.empty() ? "" : ", ") + p;
          c.reason = "this CPU has no " + paths + " path (best: " + rep.cpu_simd + ")";
        } else {
          try {
            run_cell(c, mm, engines, mm.prompts[pi], v, o, default_simd);
          } catch (const std::exception& e) {  // ember::Error, and filesystem errors of the cell dir
            c.status = "error";
            c.reason = printable(e.what());
            std::error_code ec;
            if (o.keep) c.dir = cell_dir(o, c);  // what it left, to look at
            else std::filesystem::remove_all(cell_dir(o, c), ec);
          }
          set_simd_override(default_simd);
        }
        c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        rep.cells.push_back(std::move(c));
        progress->update(++done);
      }
    }
  }
  if (progress) progress->finish();
  return rep;
}

}  // namespace ember::analysis
