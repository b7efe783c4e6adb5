#include "analysis/kv_quant_run.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <span>
#include <string>

#include "util/error.h"
#include "util/kl.h"

namespace ember::analysis {

namespace {

// Indices of the k largest logits, ties to the lower index, as a sorted set.
std::vector<int32_t> top_k_of(const float* x, int n, int k) {
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

}  // namespace

const char* kv_quant_mode_name(KvQuantMode m) { return m == KvQuantMode::in_loop ? "in-loop" : "prefix"; }

KvQuantMode parse_kv_quant_mode(const std::string& s, const char* where, const char* flag) {
  if (s == "in-loop") return KvQuantMode::in_loop;
  if (s == "prefix") return KvQuantMode::prefix;
  fail_field(where, flag, "in-loop or prefix", "'" + s + "'");
}

KvQuantReference make_reference(model::Engine& engine, const std::vector<int32_t>& t, int c, int top_k) {
  const int n = int(t.size()), V = engine.config().n_vocab;
  EMBER_CHECK(c >= 1 && n >= c + 2);
  KvQuantReference r;
  r.tokens = &t;
  r.c = c;
  r.q = n - 1 - c;
  const int P = r.q + c, E = engine.config().n_embd;
  r.native = engine.new_cache(P);
  r.residual.resize(size_t(engine.config().n_layers));
  model::ForwardHooks hooks;
  hooks.on_residual = [&](int boundary, int, int rows, const float* x) {
    if (boundary < int(r.residual.size())) r.residual[size_t(boundary)].assign(x, x + size_t(rows) * E);
  };
  // One call over the whole prompt: bit-identical to prefill then one-by-one decode
  // (canonical-v1); only the last C rows' logits are kept.
  const std::vector<float> all = engine.forward(r.native, std::span<const int32_t>(t.data(), size_t(P)), &hooks, true);
  r.logits.assign(all.begin() + ptrdiff_t(size_t(r.q) * V), all.end());
  for (int i = 0; i < c; ++i) {
    r.log_p.push_back(log_softmax(r.logits.data() + size_t(i) * V, size_t(V)));
    r.top.push_back(top_k_of(r.logits.data() + size_t(i) * V, V, top_k));
  }
  return r;
}

std::vector<float> run_plan(model::Engine& engine, const KvQuantReference& ref, const KvCachePlan& plan,
                            KvQuantMode mode, KvRotation rotation) {
  const model::ModelConfig& mc = engine.config();
  const int Q = ref.q, C = ref.c, E = mc.n_embd, V = mc.n_vocab;
  const int32_t* t = ref.tokens->data();
  std::vector<float> logits(size_t(C) * V);
  if (mode == KvQuantMode::in_loop) {
    // embed + run_layers + lm_head are forward()'s own steps; the LM head only for the C rows.
    model::ForwardHooks hooks;
    if (plan.quantizes_any()) {
      hooks.transform_kv = [&plan, rotation, G = mc.n_kv_heads, D = mc.head_dim](int layer, int, float* k, float* v) {
        plan.apply(rotation, layer, G, D, k, v);
      };
      // llama.cpp converts Q to q8_0 where K is quantized; a layer's, not one head's, affair.
      if (plan.head < 0)
        hooks.transform_q = [&plan, rotation, D = mc.head_dim](int layer, const float* q, float* out) {
          plan.apply_query(rotation, layer, D, q, out);
        };
    }
    // Layers before the first quantized one compute exactly the native run: start after them,
    // from its residual and with its rows of those layers.
    int first = 0;
    while (first < mc.n_layers && !plan.quantizes(first)) ++first;
    if (first == mc.n_layers) first = 0;  // nothing quantized: the whole canonical run
    model::KvCache cache = ref.native.copy();
    std::vector<float> x;
    if (first > 0) {
      x = ref.residual[size_t(first)];
    } else {
      x.resize(size_t(Q + C) * E);
      engine.embed(std::span<const int32_t>(t, size_t(Q + C)), x.data());
    }
    engine.run_layers(first, mc.n_layers, cache, 0, Q + C, x.data(), &hooks);
    engine.lm_head(x.data() + size_t(Q) * E, C, logits.data());
    return logits;
  }
  model::KvCache cache = ref.native.copy();  // rows [Q, Q+C) are rewritten by the decode below
  cache.n_pos = Q;
  plan.apply(rotation, cache, 0, Q);
  for (int i = 0; i < C; ++i) {
    const std::vector<float> lg = engine.forward(cache, std::span<const int32_t>(t + Q + i, 1));
    plan.apply(rotation, cache, Q + i, Q + i + 1);
    std::copy(lg.begin(), lg.end(), logits.begin() + ptrdiff_t(size_t(i) * V));
  }
  return logits;
}

void KvQuantScore::add(const KvQuantReference& ref, const std::vector<float>& logits, int V, int top_k,
                       const char* where) {
  const std::vector<int32_t>& t = *ref.tokens;
  for (int i = 0; i < ref.c; ++i) {
    const float* r = ref.logits.data() + size_t(i) * V;
    const float* lg = logits.data() + size_t(i) * V;
    const std::optional<double> d = kl_divergence(r, lg, size_t(V));
    if (!d) fail(where, "non-finite logits at position " + std::to_string(ref.q + i));
    kl.push_back(*d);
    top1_agree += argmax(r, V) == argmax(lg, V);
    const std::vector<int32_t> tk = top_k_of(lg, V, top_k);
    std::vector<int32_t> both;
    std::set_intersection(ref.top[size_t(i)].begin(), ref.top[size_t(i)].end(), tk.begin(), tk.end(),
                          std::back_inserter(both));
    overlap += double(both.size()) / double(ref.top[size_t(i)].size());
    const int32_t next = t[size_t(ref.q + i + 1)];
    const std::vector<double> ls = log_softmax(lg, size_t(V));
    dnll += -ls[size_t(next)] + ref.log_p[size_t(i)][size_t(next)];
  }
}

KlSummary summarize_kl(const std::vector<double>& kl) {
  EMBER_CHECK(!kl.empty());
  std::vector<double> sorted = kl;
  std::sort(sorted.begin(), sorted.end());
  double sum = 0;
  for (double v : kl) sum += v;
  const size_t rank = size_t(std::ceil(0.99 * double(sorted.size())));
  return {sum / double(kl.size()), sorted[std::max<size_t>(rank, 1) - 1], sorted.back()};
}

}  // namespace ember::analysis
