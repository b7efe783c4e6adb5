#include "analysis/kv_quant_study.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <span>

#include "analysis/kv_quantize.h"
#include "gguf/quantize.h"
#include "util/error.h"
#include "util/f16.h"
#include "util/kl.h"

namespace ember::analysis {

namespace {

using ojson = nlohmann::ordered_json;

bool has_k(PerturbPart p) { return p != PerturbPart::v; }
bool has_v(PerturbPart p) { return p != PerturbPart::k; }

// Indices of the k largest logits, ties to the lower index, as a sorted set.
std::vector<int32_t> top_k(const float* x, int n, int k) {
  std::vector<int32_t> idx(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) idx[size_t(i)] = i;
  k = std::min(k, n);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) {
    return x[a] > x[b] || (x[a] == x[b] && a < b);
  });
  idx.resize(size_t(k));
  std::sort(idx.begin(), idx.end());
  return idx;
}

int32_t argmax(const float* x, int n) {
  int32_t best = 0;
  for (int i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return best;
}

void quantize_rows(model::KvCache& c, const KvQuantConfig& cf, KvRotation rot, int begin,
                   int end) {
  for (int l = 0; l < c.n_layers; ++l) {
    if (has_k(cf.part)) quantize_kv_rows(c, KvPart::k, cf.type, rot, l, begin, end, true);
    if (has_v(cf.part)) quantize_kv_rows(c, KvPart::v, cf.type, rot, l, begin, end, true);
  }
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

std::string type_str(gguf::TensorType t) { return gguf::type_name(uint32_t(t)); }

}  // namespace

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
  const int C = o.continuation, V = mc.n_vocab, LH = mc.n_layers * mc.n_kv_heads;

  KvQuantStudy st;
  st.options = o;
  st.model_identity = engine.model().identity();
  st.n_layers = mc.n_layers;
  st.n_kv_heads = mc.n_kv_heads;
  st.head_dim = mc.head_dim;
  struct Acc {
    std::vector<double> kd, kn, vd, vn;
    double overlap = 0, dnll = 0;
  };
  std::vector<Acc> acc;
  for (gguf::TensorType t : o.types)
    for (PerturbPart p : o.parts) {
      KvQuantConfig cf;
      cf.type = t;
      cf.part = p;
      st.configs.push_back(cf);
      acc.push_back({std::vector<double>(size_t(LH)), std::vector<double>(size_t(LH)),
                     std::vector<double>(size_t(LH)), std::vector<double>(size_t(LH)), 0, 0});
    }

  for (const std::vector<int32_t>& t : prompts) {
    const int n = int(t.size());
    if (n < C + 2) {
      ++st.skipped;
      continue;
    }
    ++st.prompts;
    const int Q = n - 1 - C;
    model::KvCache native = engine.new_cache(n);
    engine.forward(native, std::span<const int32_t>(t.data(), size_t(Q)));
    const model::KvCache base = native.copy();
    // Native logits of the C steps: one batched call (bit-identical to one-by-one decode).
    const std::vector<float> ref =
        engine.forward(native, std::span<const int32_t>(t.data() + Q, size_t(C)), nullptr, true);
    std::vector<std::vector<double>> ref_ls;
    std::vector<std::vector<int32_t>> ref_top;
    for (int i = 0; i < C; ++i) {
      ref_ls.push_back(log_softmax(ref.data() + size_t(i) * V, size_t(V)));
      ref_top.push_back(top_k(ref.data() + size_t(i) * V, V, o.top_k));
    }
    for (size_t ci = 0; ci < st.configs.size(); ++ci) {
      KvQuantConfig& cf = st.configs[ci];
      Acc& a = acc[ci];
      model::KvCache q = base.copy();
      quantize_rows(q, cf, o.rotation, 0, Q);
      add_error(base, q, Q, true, a.kd, a.kn);
      add_error(base, q, Q, false, a.vd, a.vn);
      for (int i = 0; i < C; ++i) {
        const std::vector<float> lg = engine.forward(q, std::span<const int32_t>(&t[size_t(Q + i)], 1));
        quantize_rows(q, cf, o.rotation, Q + i, Q + i + 1);
        const float* r = ref.data() + size_t(i) * V;
        const std::optional<double> kl = kl_divergence(r, lg.data(), size_t(V));
        if (!kl) fail(where, "non-finite logits at prompt " + std::to_string(st.prompts - 1));
        cf.kl.push_back(*kl);
        cf.top1_agree += argmax(r, V) == argmax(lg.data(), V);
        const std::vector<int32_t> tk = top_k(lg.data(), V, o.top_k);
        std::vector<int32_t> both;
        std::set_intersection(ref_top[size_t(i)].begin(), ref_top[size_t(i)].end(), tk.begin(),
                              tk.end(), std::back_inserter(both));
        a.overlap += double(both.size()) / double(ref_top[size_t(i)].size());
        const int32_t next = t[size_t(Q + i + 1)];
        const std::vector<double> ls = log_softmax(lg.data(), size_t(V));
        a.dnll += -ls[size_t(next)] + ref_ls[size_t(i)][size_t(next)];
      }
    }
    st.steps += C;
  }
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
    std::vector<double> sorted = cf.kl;
    std::sort(sorted.begin(), sorted.end());
    double sum = 0;
    for (double v : cf.kl) sum += v;
    cf.kl_mean = sum / double(cf.kl.size());
    cf.kl_max = sorted.back();
    const size_t rank = size_t(std::ceil(0.99 * double(sorted.size())));
    cf.kl_p99 = sorted[std::max<size_t>(rank, 1) - 1];
    cf.topk_overlap = a.overlap / double(st.steps);
    cf.dnll = a.dnll / double(st.steps);
  }
  return st;
}

std::string KvQuantStudy::json() const {
  ojson j;
  j["study"] = "kv-quant";
  j["version"] = 1;
  j["model"] = {{"identity", model_identity},
                {"path", model_path},
                {"geometry", {{"layers", n_layers}, {"kv_heads", n_kv_heads}, {"head_dim", head_dim}}}};
  j["prompts"] = {{"path", prompts_path}, {"used", prompts}, {"skipped_too_short", skipped}};
  j["protocol"] = {
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
      {"rel_err", "sqrt(sum (q - x)^2 / sum x^2) per (layer, KV head) over every prompt's prefix"}};
  ojson cfgs = ojson::array();
  for (const KvQuantConfig& c : configs) {
    cfgs.push_back({{"type", type_str(c.type)},
                    {"part", perturb_part_name(c.part)},
                    {"kl", {{"mean", c.kl_mean}, {"p99", c.kl_p99}, {"max", c.kl_max}}},
                    {"top1_agreement", steps ? double(c.top1_agree) / double(steps) : 0.0},
                    {"top1_agree", c.top1_agree},
                    {"topk_overlap", c.topk_overlap},
                    {"dnll", c.dnll},
                    {"k_rel_err", {{"mean", c.k_rel_err_mean}, {"per_layer_head", c.k_rel_err}}},
                    {"v_rel_err", {{"mean", c.v_rel_err_mean}, {"per_layer_head", c.v_rel_err}}}});
  }
  j["configs"] = cfgs;
  return j.dump(2) + "\n";
}

std::string KvQuantStudy::table() const {
  std::string o = "kv-quant study: " + std::to_string(prompts) + " prompts (" +
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
  return o;
}

}  // namespace ember::analysis
