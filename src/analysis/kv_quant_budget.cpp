#include "analysis/kv_quant_budget.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "kv/seal.h"
#include "util/ed25519.h"
#include "util/error.h"
#include "util/progress.h"

namespace ember::analysis {

namespace {

using gguf::TensorType;
using ojson = nlohmann::ordered_json;

// A whole decimal number, nothing after it; nullopt otherwise.
std::optional<double> number(const std::string& s) {
  if (s.empty() || std::isspace(static_cast<unsigned char>(s[0]))) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::string type_str(TensorType t) { return gguf::type_name(uint32_t(t)); }

KvBudgetFigures measure(model::Engine& engine, const std::vector<const KvQuantReference*>& refs,
                        const KvCachePlan& plan, const KvQuantStudyOptions& o, Progress& progress,
                        int64_t& done) {
  KvQuantScore s;
  for (const KvQuantReference* r : refs) {
    s.add(*r, run_plan(engine, *r, plan, o.mode, o.rotation), engine.config().n_vocab, o.top_k,
          "study kv-quant --budget");
    progress.update(++done);
  }
  KvBudgetFigures f;
  f.prompts = int(refs.size());
  f.steps = s.steps();
  const KlSummary k = summarize_kl(s.kl);
  f.kl_mean = k.mean;
  f.kl_p99 = k.p99;
  f.kl_max = k.max;
  f.top1 = double(s.top1_agree) / double(f.steps);
  f.dnll = s.dnll / double(f.steps);
  return f;
}

ojson figures_json(const KvBudgetFigures& f) {
  return {{"prompts", f.prompts}, {"steps", f.steps},     {"kl_mean", f.kl_mean}, {"kl_p99", f.kl_p99},
          {"kl_max", f.kl_max},   {"top1_agreement", f.top1}, {"dnll", f.dnll}};
}

}  // namespace

KvBudget parse_kv_budget(const std::string& s, const char* where, const char* flag) {
  const std::string want = "kl<=X or kl<=X,top1>=Y (X >= 0 nats, Y in [0, 1])";
  KvBudget b;
  b.text = s;
  const size_t comma = s.find(',');
  const std::string first = s.substr(0, comma);
  if (first.rfind("kl<=", 0) != 0) fail_field(where, flag, want, "'" + s + "'");
  const std::optional<double> x = number(first.substr(4));
  if (!x || *x < 0) fail_field(where, flag, want, "'" + s + "'");
  b.kl_max = *x;
  if (comma != std::string::npos) {
    const std::string second = s.substr(comma + 1);
    if (second.rfind("top1>=", 0) != 0) fail_field(where, flag, want, "'" + s + "'");
    const std::optional<double> y = number(second.substr(6));
    if (!y || *y < 0 || *y > 1) fail_field(where, flag, want, "'" + s + "'");
    b.top1_min = *y;
  }
  return b;
}

bool KvBudgetFigures::meets(const KvBudget& b) const {
  return kl_mean <= b.kl_max && (!b.top1_min || top1 >= *b.top1_min);
}

KvBudgetResult run_kv_quant_budget(model::Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                                   const KvQuantStudyOptions& options, const KvBudget& budget) {
  const char* where = "study kv-quant --budget";
  KvQuantStudyOptions o = options;
  if (o.types.empty())
    o.types = {TensorType::Q8_0, TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1,
               TensorType::IQ4_NL};
  if (o.continuation < 1 || o.continuation > 256)
    fail_field(where, "--continuation", "1..256", std::to_string(o.continuation));
  if (o.top_k < 1 || o.top_k > 1000) fail_field(where, "--top-k", "1..1000", std::to_string(o.top_k));
  const model::ModelConfig& mc = engine.config();
  const int L = mc.n_layers, G = mc.n_kv_heads, D = mc.head_dim, C = o.continuation;
  for (TensorType t : o.types) check_kv_quantizable(t, G, D, where);

  KvBudgetResult r;
  r.budget = budget;
  r.options = o;
  r.model_identity = engine.model().identity();
  r.engine_fingerprint = engine.fingerprint();
  r.n_layers = L;
  r.n_kv_heads = G;
  r.head_dim = D;

  // The candidates, cheapest first.
  std::vector<TensorType> types = {TensorType::F16};
  for (TensorType t : o.types)
    if (std::find(types.begin(), types.end(), t) == types.end()) types.push_back(t);
  std::vector<KvCachePlan> plans;
  for (TensorType kt : types)
    for (TensorType vt : types) {
      KvCachePlan p = KvCachePlan::uniform(L, kt, vt);
      plans.push_back(p);
      if (L >= 3 && p.quantizes_any()) {
        p.k.front() = p.v.front() = p.k.back() = p.v.back() = TensorType::F16;
        plans.push_back(p);
      }
    }
  std::stable_sort(plans.begin(), plans.end(), [&](const KvCachePlan& a, const KvCachePlan& b) {
    return a.bytes_per_position(G, D) < b.bytes_per_position(G, D);
  });
  r.f16_bytes_per_position = KvCachePlan::uniform(L, TensorType::F16, TensorType::F16).bytes_per_position(G, D);

  // The split, and the native runs of every usable prompt.
  std::vector<KvQuantReference> refs;
  std::vector<const KvQuantReference*> choose, held;
  refs.reserve(prompts.size());
  for (const std::vector<int32_t>& t : prompts) {
    if (int(t.size()) < C + 2) {
      ++r.skipped;
      continue;
    }
    refs.push_back(make_reference(engine, t, C, o.top_k));
  }
  r.prompts = int(refs.size());
  for (size_t i = 0; i < refs.size(); ++i) (i % 2 == 0 ? choose : held).push_back(&refs[i]);
  if (held.empty())
    fail_field(where, "--prompts", "at least two prompts of " + std::to_string(C + 2) +
                                       " or more tokens (--continuation + 2): one to choose, one held out",
               std::to_string(refs.size()) + " (" + std::to_string(r.skipped) + " shorter)");

  Progress progress("kv-quant budget", int64_t(plans.size()) * int64_t(choose.size()), "runs");
  int64_t done = 0;
  for (const KvCachePlan& p : plans) {
    KvBudgetCandidate c;
    c.plan = p;
    c.bytes_per_position = p.bytes_per_position(G, D);
    c.bits_per_value = p.bits_per_value(G, D);
    c.choose = measure(engine, choose, p, o, progress, done);
    if (c.choose.meets(budget)) c.held_out = measure(engine, held, p, o, progress, done);
    r.tried.push_back(c);
    if (c.held_out && c.held_out->meets(budget)) break;
  }
  progress.finish();
  EMBER_CHECK(!r.tried.empty() && r.tried.back().held_out && r.tried.back().held_out->meets(budget));
  r.chosen = r.tried.size() - 1;
  return r;
}

std::string KvBudgetResult::table() const {
  const KvBudgetCandidate& c = tried[chosen];
  char line[512];
  std::string o = "kv-quant budget " + budget.text + ", mode " + kv_quant_mode_name(options.mode) + ", rotation " +
                  kv_rotation_name(options.rotation) + ": " + std::to_string(tried.size()) +
                  " candidates measured, cheapest first (" + std::to_string(prompts) + " prompts: even choose, odd held out)\n";
  std::snprintf(line, sizeof line, "%-48s %8s %11s %8s %11s %8s\n", "candidate", "bits/val", "KL choose",
                "top-1", "KL held", "top-1");
  o += line;
  for (const KvBudgetCandidate& t : tried) {
    std::string held_kl = "-", held_top1 = "-";
    if (t.held_out) {
      char b[32];
      std::snprintf(b, sizeof b, "%.3e", t.held_out->kl_mean);
      held_kl = b;
      std::snprintf(b, sizeof b, "%.4f", t.held_out->top1);
      held_top1 = b;
    }
    std::snprintf(line, sizeof line, "%-48s %8.3f %11.3e %8.4f %11s %8s\n", t.plan.label().c_str(), t.bits_per_value,
                  t.choose.kl_mean, t.choose.top1, held_kl.c_str(), held_top1.c_str());
    o += line;
  }
  std::snprintf(line, sizeof line, "choice: %s, %.3f bits per value (%.1f%% of f16), held-out KL %.3e, top-1 %.4f\n",
                c.plan.label().c_str(), c.bits_per_value,
                100.0 * double(c.bytes_per_position) / double(f16_bytes_per_position), c.held_out->kl_mean,
                c.held_out->top1);
  o += line;
  if (!c.plan.quantizes_any()) o += "no quantized cache meets the budget: keep K and V at f16\n";
  return o;
}

nlohmann::ordered_json kv_quant_certificate(const KvBudgetResult& r, const KvCertificateInputs& in,
                                            const std::string& sign_key_pem) {
  const KvBudgetCandidate& c = r.tried[r.chosen];
  ojson layers = ojson::array();
  for (int l = 0; l < r.n_layers; ++l)
    layers.push_back({{"k", type_str(c.plan.k[size_t(l)])}, {"v", type_str(c.plan.v[size_t(l)])}});
  ojson rejected = ojson::array();
  for (size_t i = 0; i < r.chosen; ++i)
    if (r.tried[i].held_out)
      rejected.push_back({{"label", r.tried[i].plan.label()}, {"held_out", figures_json(*r.tried[i].held_out)}});
  ojson j;
  j["format"] = kKvQuantCertificateFormat;
  j["ember_version"] = in.ember_version;
  j["model"] = {{"identity", r.model_identity},
                {"name", in.model_name},
                {"layers", r.n_layers},
                {"kv_heads", r.n_kv_heads},
                {"head_dim", r.head_dim}};
  j["prompts"] = {{"name", in.prompts_name},
                  {"sha256", in.prompts_sha256},
                  {"lines", in.prompt_lines},
                  {"used", r.prompts},
                  {"skipped_too_short", r.skipped},
                  {"split", "even-odd"}};
  ojson budget = {{"text", r.budget.text}, {"kl_mean_max", r.budget.kl_max}};
  if (r.budget.top1_min) budget["top1_min"] = *r.budget.top1_min;
  j["budget"] = budget;
  j["protocol"] = {{"mode", kv_quant_mode_name(r.options.mode)},
                   {"rotation", kv_rotation_name(r.options.rotation)},
                   {"continuation", r.options.continuation},
                   {"engine", r.engine_fingerprint}};
  j["choice"] = {{"label", c.plan.label()},
                 {"layers", layers},
                 {"bytes_per_position", c.bytes_per_position},
                 {"f16_bytes_per_position", r.f16_bytes_per_position},
                 {"bits_per_value", c.bits_per_value}};
  j["measured"] = {{"choose", figures_json(c.choose)}, {"held_out", figures_json(*c.held_out)}};
  j["candidates_measured"] = r.tried.size();
  j["rejected_on_held_out"] = rejected;
  j["meets_budget"] = true;
  const std::string seal = kv::manifest_seal(nlohmann::json(j));
  j[kv::kSealKey] = seal;
  if (!sign_key_pem.empty()) j[kv::kSignatureKey] = kv::signature_to_json(ed25519_sign(sign_key_pem, kv::seal_signing_message(seal)));
  return j;
}

}  // namespace ember::analysis
