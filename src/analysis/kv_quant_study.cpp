#include "analysis/kv_quant_study.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <span>

#include "analysis/kv_cache_plan.h"
#include "analysis/kv_quantize.h"
#include "gguf/quantize.h"
#include "util/error.h"
#include "util/f16.h"
#include "util/kl.h"
#include "util/progress.h"

namespace ember::analysis {

namespace {

using ojson = nlohmann::ordered_json;

bool has_k(PerturbPart p) { return p != PerturbPart::v; }
bool has_v(PerturbPart p) { return p != PerturbPart::k; }

KvCachePlan plan_of(const KvQuantConfig& c, int layers) {
  return KvCachePlan::uniform(layers, has_k(c.part) ? c.type : gguf::TensorType::F16,
                              has_v(c.part) ? c.type : gguf::TensorType::F16);
}

// Sums of (q - x)^2 and x^2 per (layer, head) over positions [0, n), f64 in storage order.
void add_error(const model::KvCache& x, const model::KvCache& q, int n, bool keys,
               std::vector<double>& diff, std::vector<double>& norm) {
  for (int l = 0; l < x.n_layers; ++l)
    for (int h = 0; h < x.n_kv_heads; ++h) {
      const uint16_t* a = keys ? x.k_row(l, h, 0) : x.v_row(l, h, 0);
      const uint16_t* b = keys ? q.k_row(l, h, 0) : q.v_row(l, h, 0);
      double d2 = 0, x2 = 0;
      for (size_t i = 0, m = size_t(n) * size_t(x.head_dim); i < m; ++i) {
        const double va = f16_to_f32(a[i]), vb = f16_to_f32(b[i]);
        d2 += (vb - va) * (vb - va);
        x2 += va * va;
      }
      diff[size_t(l) * x.n_kv_heads + h] += d2;
      norm[size_t(l) * x.n_kv_heads + h] += x2;
    }
}

KvQuantFigures figures(const KvQuantScore& s) {
  KvQuantFigures f;
  const double n = double(s.steps());
  for (double v : s.kl) f.kl_mean += v;
  f.kl_mean /= n;
  f.top1 = double(s.top1_agree) / n;
  f.dnll = s.dnll / n;
  return f;
}

std::string type_str(gguf::TensorType t) { return gguf::type_name(uint32_t(t)); }

ojson figures_json(const KvQuantFigures& f) {
  return {{"kl_mean", f.kl_mean}, {"top1_agreement", f.top1}, {"dnll", f.dnll}};
}

}  // namespace

const char* kv_quant_groups_name(KvQuantStudyOptions::Groups g) {
  using G = KvQuantStudyOptions::Groups;
  return g == G::none ? "none" : g == G::layers ? "layers" : "heads";
}

KvQuantStudyOptions::Groups parse_kv_quant_groups(const std::string& s, const char* where, const char* flag) {
  using G = KvQuantStudyOptions::Groups;
  if (s == "none") return G::none;
  if (s == "layers") return G::layers;
  if (s == "heads") return G::heads;
  fail_field(where, flag, "none, layers or heads", "'" + s + "'");
}

KvQuantStudy run_kv_quant_study(model::Engine& engine,
                                const std::vector<std::vector<int32_t>>& prompts,
                                KvQuantStudyOptions o) {
  const char* where = "study kv-quant";
  if (o.types.empty())
    o.types = {gguf::TensorType::Q8_0, gguf::TensorType::Q4_0, gguf::TensorType::Q4_1,
               gguf::TensorType::Q5_0, gguf::TensorType::Q5_1, gguf::TensorType::IQ4_NL};
  if (o.parts.empty()) o.parts = {PerturbPart::k, PerturbPart::v, PerturbPart::kv};
  if (o.continuation < 1 || o.continuation > 256)
    fail_field(where, "--continuation", "1..256", std::to_string(o.continuation));
  if (o.top_k < 1 || o.top_k > 1000) fail_field(where, "--top-k", "1..1000", std::to_string(o.top_k));
  const model::ModelConfig& mc = engine.config();
  for (gguf::TensorType t : o.types) check_kv_quantizable(t, mc.n_kv_heads, mc.head_dim, where);
  const int C = o.continuation, V = mc.n_vocab, L = mc.n_layers, G = mc.n_kv_heads, LH = L * G;

  KvQuantStudy st;
  st.options = o;
  st.model_identity = engine.model().identity();
  st.n_layers = L;
  st.n_kv_heads = G;
  st.head_dim = mc.head_dim;
  struct Acc {
    std::vector<double> kd, kn, vd, vn;
    KvQuantScore score;
    std::vector<KvQuantScore> layers, heads;
  };
  const bool by_layer = o.groups != KvQuantStudyOptions::Groups::none;
  const bool by_head = o.groups == KvQuantStudyOptions::Groups::heads;
  std::vector<Acc> acc;
  int64_t runs_per_prompt = 0;
  for (gguf::TensorType t : o.types)
    for (PerturbPart p : o.parts) {
      KvQuantConfig cf;
      cf.type = t;
      cf.part = p;
      const KvCachePlan plan = plan_of(cf, L);
      cf.bytes_per_position = plan.bytes_per_position(G, mc.head_dim);
      cf.bits_per_value = plan.bits_per_value(G, mc.head_dim);
      st.configs.push_back(cf);
      const bool groups = p == PerturbPart::kv;
      acc.push_back({std::vector<double>(size_t(LH)), std::vector<double>(size_t(LH)),
                     std::vector<double>(size_t(LH)), std::vector<double>(size_t(LH)), {},
                     std::vector<KvQuantScore>(groups && by_layer ? size_t(L) : 0),
                     std::vector<KvQuantScore>(groups && by_head ? size_t(LH) : 0)});
      runs_per_prompt += 1 + int64_t(acc.back().layers.size() + acc.back().heads.size());
    }

  int usable = 0;
  for (const std::vector<int32_t>& t : prompts) usable += int(t.size()) >= C + 2;
  Progress progress("kv-quant " + std::string(kv_quant_mode_name(o.mode)), int64_t(usable) * runs_per_prompt,
                    "runs");
  int64_t done = 0;
  for (const std::vector<int32_t>& t : prompts) {
    if (int(t.size()) < C + 2) {
      ++st.skipped;
      continue;
    }
    ++st.prompts;
    const KvQuantReference ref = make_reference(engine, t, C, o.top_k);
    const int Q = ref.q;
    for (size_t ci = 0; ci < st.configs.size(); ++ci) {
      const KvQuantConfig& cf = st.configs[ci];
      Acc& a = acc[ci];
      const KvCachePlan plan = plan_of(cf, L);
      a.score.add(ref, run_plan(engine, ref, plan, o.mode, o.rotation), V, o.top_k, where);
      progress.update(++done);
      // The format's error on the native prefix rows, whatever the mode.
      model::KvCache q = ref.native.copy();
      plan.apply(o.rotation, q, 0, Q);
      add_error(ref.native, q, Q, true, a.kd, a.kn);
      add_error(ref.native, q, Q, false, a.vd, a.vn);
      // One layer, then one (layer, head), at a time.
      for (size_t l = 0; l < a.layers.size(); ++l) {
        KvCachePlan one = KvCachePlan::uniform(L, gguf::TensorType::F16, gguf::TensorType::F16);
        one.k[l] = one.v[l] = cf.type;
        a.layers[l].add(ref, run_plan(engine, ref, one, o.mode, o.rotation), V, o.top_k, where);
        progress.update(++done);
        for (int h = 0; h < G && !a.heads.empty(); ++h) {
          one.head = h;
          a.heads[l * size_t(G) + size_t(h)].add(ref, run_plan(engine, ref, one, o.mode, o.rotation), V,
                                                  o.top_k, where);
          progress.update(++done);
        }
      }
    }
    st.steps += C;
  }
  progress.finish();
  if (st.prompts == 0)
    fail_field(where, "--prompts", "at least one prompt of " + std::to_string(C + 2) +
                                       " or more tokens (--continuation + 2)",
               std::to_string(st.skipped) + " prompts, all shorter");
  for (size_t ci = 0; ci < st.configs.size(); ++ci) {
    KvQuantConfig& cf = st.configs[ci];
    const Acc& a = acc[ci];
    cf.k_rel_err.resize(size_t(LH));
    cf.v_rel_err.resize(size_t(LH));
    for (int i = 0; i < LH; ++i) {
      cf.k_rel_err[size_t(i)] = a.kn[size_t(i)] > 0 ? std::sqrt(a.kd[size_t(i)] / a.kn[size_t(i)]) : 0;
      cf.v_rel_err[size_t(i)] = a.vn[size_t(i)] > 0 ? std::sqrt(a.vd[size_t(i)] / a.vn[size_t(i)]) : 0;
      cf.k_rel_err_mean += cf.k_rel_err[size_t(i)] / LH;
      cf.v_rel_err_mean += cf.v_rel_err[size_t(i)] / LH;
    }
    cf.kl = a.score.kl;
    const KlSummary k = summarize_kl(cf.kl);
    cf.kl_mean = k.mean;
    cf.kl_p99 = k.p99;
    cf.kl_max = k.max;
    cf.top1_agree = a.score.top1_agree;
    cf.topk_overlap = a.score.overlap / double(st.steps);
    cf.dnll = a.score.dnll / double(st.steps);
    for (const KvQuantScore& s : a.layers) cf.per_layer.push_back(figures(s));
    for (const KvQuantScore& s : a.heads) cf.per_layer_head.push_back(figures(s));
  }
  return st;
}

std::string KvQuantStudy::json() const { return json_doc().dump(2) + "\n"; }

ojson KvQuantStudy::json_doc() const {
  ojson j;
  j["study"] = "kv-quant";
  j["version"] = 2;
  j["model"] = {{"identity", model_identity},
                {"path", model_path},
                {"geometry", {{"layers", n_layers}, {"kv_heads", n_kv_heads}, {"head_dim", head_dim}}}};
  j["prompts"] = {{"path", prompts_path}, {"used", prompts}, {"skipped_too_short", skipped}};
  j["protocol"] = {
      {"mode", kv_quant_mode_name(options.mode)},
      {"mode_means", options.mode == KvQuantMode::in_loop
                         ? "every K/V row quantized as the engine writes it, over the whole prompt (as llama.cpp -ctk/-ctv)"
                         : "prefix only: a finished native prefix quantized once, then the continuation's rows; "
                           "not what llama.cpp runs"},
      {"groups", kv_quant_groups_name(options.groups)},
      {"continuation", options.continuation},
      {"top_k", options.top_k},
      {"steps_per_config", steps},
      {"quantization", "every layer; llama.cpp's CPU encoder (ggml-cpu x86), dequantized, stored f16"},
      {"rotation", kv_rotation_name(options.rotation)},
      {"rotation_block",
       {{"k", kv_rotation_block(options.rotation, head_dim, KvPart::k)},
        {"v", kv_rotation_block(options.rotation, head_dim, KvPart::v)}}},
      {"kl", "KL(softmax(native) || softmax(quantized)) of the next-token distribution, nats"},
      {"kl_p99", "nearest rank: the ceil(0.99 N)-th smallest"},
      {"dnll", "mean NLL(quantized) - NLL(native) of the reference next token"},
      {"rel_err", "sqrt(sum (q - x)^2 / sum x^2) per (layer, KV head) over every prompt's native prefix"},
      {"per_layer", "K+V of that layer only quantized, every other layer f16"},
      {"per_layer_head", "[layer * kv_heads + head]: that KV head of that layer only (its row quantized whole, "
                         "the other heads' values kept)"}};
  ojson cfgs = ojson::array();
  for (const KvQuantConfig& c : configs) {
    ojson layers = ojson::array(), heads = ojson::array();
    for (const KvQuantFigures& f : c.per_layer) layers.push_back(figures_json(f));
    for (const KvQuantFigures& f : c.per_layer_head) heads.push_back(figures_json(f));
    cfgs.push_back({{"type", type_str(c.type)},
                    {"part", perturb_part_name(c.part)},
                    {"cache_type_k", has_k(c.part) ? type_str(c.type) : "f16"},
                    {"cache_type_v", has_v(c.part) ? type_str(c.type) : "f16"},
                    {"bytes_per_position", c.bytes_per_position},
                    {"bits_per_value", c.bits_per_value},
                    {"kl", {{"mean", c.kl_mean}, {"p99", c.kl_p99}, {"max", c.kl_max}}},
                    {"top1_agreement", steps ? double(c.top1_agree) / double(steps) : 0.0},
                    {"top1_agree", c.top1_agree},
                    {"topk_overlap", c.topk_overlap},
                    {"dnll", c.dnll},
                    {"k_rel_err", {{"mean", c.k_rel_err_mean}, {"per_layer_head", c.k_rel_err}}},
                    {"v_rel_err", {{"mean", c.v_rel_err_mean}, {"per_layer_head", c.v_rel_err}}},
                    {"per_layer", layers},
                    {"per_layer_head", heads}});
  }
  j["configs"] = cfgs;
  return j;
}

std::string KvQuantStudy::table() const {
  std::string o = std::string("kv-quant study, mode ") + kv_quant_mode_name(options.mode) +
                  (options.mode == KvQuantMode::prefix ? " (prefix only: not what llama.cpp runs)" : "") + ": " +
                  std::to_string(prompts) + " prompts (" +
                  std::to_string(skipped) + " too short), " + std::to_string(steps) +
                  " next-token distributions per config, continuation " +
                  std::to_string(options.continuation) + ", top-" + std::to_string(options.top_k) +
                  ", rotation " + kv_rotation_name(options.rotation) + " (K block " +
                  std::to_string(kv_rotation_block(options.rotation, head_dim, KvPart::k)) +
                  ", V block " +
                  std::to_string(kv_rotation_block(options.rotation, head_dim, KvPart::v)) + ")\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-7s %-4s %11s %11s %11s %8s %8s %11s %10s %10s\n", "type",
                "part", "KL mean", "KL p99", "KL max", "top-1", "top-k", "dNLL", "K relerr", "V relerr");
  o += line;
  for (const KvQuantConfig& c : configs) {
    std::snprintf(line, sizeof line, "%-7s %-4s %11.3e %11.3e %11.3e %8.4f %8.4f %11.3e %10.3e %10.3e\n",
                  type_str(c.type).c_str(), perturb_part_name(c.part), c.kl_mean, c.kl_p99, c.kl_max,
                  steps ? double(c.top1_agree) / double(steps) : 0.0, c.topk_overlap, c.dnll,
                  c.k_rel_err_mean, c.v_rel_err_mean);
    o += line;
  }
  // Per layer: KL mean of each type's K+V with only that layer quantized.
  for (const KvQuantConfig& c : configs) {
    if (c.per_layer.empty()) continue;
    o += "per layer, " + type_str(c.type) + " K+V, KL mean (top-1):";
    for (size_t l = 0; l < c.per_layer.size(); ++l) {
      std::snprintf(line, sizeof line, "  L%zu %.3e (%.3f)", l, c.per_layer[l].kl_mean, c.per_layer[l].top1);
      o += line;
    }
    o += "\n";
  }
  return o;
}

}  // namespace ember::analysis
