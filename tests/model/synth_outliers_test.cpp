// `model synth --outliers` as the engine sees it: the chosen K pairs carry `scale` times the
// plain model's magnitude before and after RoPE (pair norms, since RoPE mixes a pair), the
// plain model's function is kept (Q compensates), and BOS takes most of the attention mass
// with a sink, measured through the queries' dot products with the cached keys.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>

#include "gguf/gguf_file.h"
#include "gguf/synth.h"
#include "gguf/synth_vocab.h"
#include "model/engine.h"
#include "model/rope.h"
#include "util/byte_io.h"

namespace ember::model::outliers_test {
namespace {

gguf::SynthSpec geometry(const std::string& arch, const std::string& outliers) {
  gguf::SynthSpec s;
  s.arch = arch;
  s.layers = 3, s.hidden = 128, s.heads = 4, s.kv_heads = 2, s.ffn = 192, s.vocab = 300, s.seed = 11;
  s.head_dim = 64;
  s.qkv_bias = arch == "qwen2" || outliers.find("sink") != std::string::npos;  // the sink needs a Q bias
  if (!outliers.empty()) s.outliers = gguf::OutlierSpec::parse(outliers);
  return s;
}

std::shared_ptr<const Model> load(const gguf::SynthSpec& s) {
  auto bytes = std::make_shared<std::vector<uint8_t>>();
  BufferSink sink(*bytes);
  gguf::synth_model(s).write(sink);
  return Model::load(gguf::GgufFile::parse(bytes, "outliers.gguf"));
}

std::vector<int32_t> prompt() {
  std::vector<int32_t> ids = {gguf::synth_vocab(300).bos};
  for (char c : std::string("the quick brown fox jumps over the lazy dog, then rests in the sun"))
    ids.push_back(int32_t(uint8_t(c)));
  return ids;
}

struct Capture {
  std::vector<std::vector<float>> k_pre, k_post, residual;  // [layer][n][G][D], [boundary][n][E]
  std::vector<float> logits;
  int n = 0;
};

Capture run(const std::shared_ptr<const Model>& m) {
  Engine e(m, {1});
  Capture r;
  const std::vector<int32_t> ids = prompt();
  r.n = int(ids.size());
  const ModelConfig& c = m->config();
  r.k_pre.resize(size_t(c.n_layers));
  r.k_post.resize(size_t(c.n_layers));
  r.residual.resize(size_t(c.n_layers + 1));
  ForwardHooks h;
  const size_t kv = size_t(c.n_kv_heads) * size_t(c.head_dim);
  h.on_kv = [&](int l, int, int n, const float* pre, const float* post, const float*) {
    r.k_pre[size_t(l)].assign(pre, pre + size_t(n) * kv);
    r.k_post[size_t(l)].assign(post, post + size_t(n) * kv);
  };
  h.on_residual = [&](int b, int, int n, const float* x) { r.residual[size_t(b)].assign(x, x + size_t(n) * size_t(c.n_embd)); };
  KvCache cache = e.new_cache(r.n);
  r.logits = e.forward(cache, ids, &h);
  return r;
}

// RMS over the prompt of the norm of pair i (dims d0, d1) of KV head g.
double pair_rms(const std::vector<float>& k, int n, int G, int D, int g, int64_t d0, int64_t d1) {
  double s = 0;
  for (int t = 0; t < n; ++t) {
    const float* row = k.data() + (size_t(t) * size_t(G) + size_t(g)) * size_t(D);
    s += double(row[d0]) * row[d0] + double(row[d1]) * row[d1];
  }
  return std::sqrt(s / n);
}

TEST(SynthOutliers, TheChosenPairsCarryTheScaleBeforeAndAfterRope) {
  for (const char* arch : {"llama", "qwen2"}) {  // normal and NEOX pairs
    SCOPED_TRACE(arch);
    const gguf::SynthSpec spec = geometry(arch, "pairs=3,scale=16");
    const gguf::OutlierPlan plan = gguf::plan_outliers(gguf::resolve_synth_spec(spec));
    const Capture plain = run(load(geometry(arch, ""))), outl = run(load(spec));
    const int G = 2, D = 64, n = plain.n;
    double chosen = 0, others = 0;
    int n_chosen = 0, n_others = 0;
    for (int l = 0; l < 3; ++l)
      for (int g = 0; g < G; ++g)
        for (int i = 0; i < D / 2; ++i) {
          bool is = false;
          for (int p : plan.pair[size_t(l * G + g)]) is = is || p == i;
          for (auto which : {&Capture::k_pre, &Capture::k_post}) {
            const double a = pair_rms((plain.*which)[size_t(l)], n, G, D, g, plan.dim0(i), plan.dim1(i));
            const double b = pair_rms((outl.*which)[size_t(l)], n, G, D, g, plan.dim0(i), plan.dim1(i));
            EXPECT_NEAR(b / a, is ? 16.0 : 1.0, is ? 16e-3 : 1e-3) << "layer " << l << " head " << g << " pair " << i;
          }
          const double b = pair_rms(outl.k_post[size_t(l)], n, G, D, g, plan.dim0(i), plan.dim1(i));
          (is ? chosen : others) += b;
          ++(is ? n_chosen : n_others);
        }
    EXPECT_EQ(n_chosen, 3 * G * 3);
    // Within the outlier model the chosen pairs stand out by about the factor.
    const double ratio = (chosen / n_chosen) / (others / n_others);
    std::printf("%s: chosen / other pair RMS after RoPE %.2f (scale 16)\n", arch, ratio);
    EXPECT_GT(ratio, 16.0 / 2) << ratio;
    EXPECT_LT(ratio, 16.0 * 2) << ratio;
    // The function is the plain model's up to rounding: Q divides what K multiplies.
    double max_diff = 0, max_abs = 0;
    for (size_t i = 0; i < plain.logits.size(); ++i) {
      max_diff = std::max(max_diff, double(std::fabs(plain.logits[i] - outl.logits[i])));
      max_abs = std::max(max_abs, double(std::fabs(plain.logits[i])));
    }
    EXPECT_LT(max_diff, 1e-4 * max_abs) << max_diff;
  }
}

// Mean attention weight of the first position (BOS) over every query t >= 1 and query head,
// per layer: q from the layer's input residual (RMSNorm, Q projection and bias, RoPE as the
// engine applies it), k the engine's post-RoPE keys, softmax over the causal window.
std::vector<double> bos_share(const std::shared_ptr<const Model>& m, const Capture& r) {
  const ModelConfig& c = m->config();
  const int E = c.n_embd, H = c.n_heads, G = c.n_kv_heads, D = c.head_dim, n = r.n;
  std::vector<double> share;
  for (int l = 0; l < c.n_layers; ++l) {
    auto f32 = [&](const std::string& name) -> const float* {
      const gguf::TensorInfo* t = m->file().find_tensor(name);
      return t ? reinterpret_cast<const float*>(t->data) : nullptr;
    };
    const std::string blk = "blk." + std::to_string(l) + ".";
    const float* norm = f32(blk + "attn_norm.weight");
    const float* wq = f32(blk + "attn_q.weight");
    const float* bq = f32(blk + "attn_q.bias");
    double sum = 0;
    int count = 0;
    for (int t = 1; t < n; ++t) {
      const float* x = r.residual[size_t(l)].data() + size_t(t) * size_t(E);
      double ms = 0;
      for (int i = 0; i < E; ++i) ms += double(x[i]) * x[i];
      const double inv = 1.0 / std::sqrt(ms / E + double(c.rms_eps));
      std::vector<float> xn(static_cast<size_t>(E)), q(static_cast<size_t>(H * D));
      for (int i = 0; i < E; ++i) xn[size_t(i)] = float(x[i] * inv * norm[i]);
      for (int o = 0; o < H * D; ++o) {
        double s = bq ? bq[o] : 0.0;
        for (int i = 0; i < E; ++i) s += double(wq[size_t(o) * size_t(E) + size_t(i)]) * xn[size_t(i)];
        q[size_t(o)] = float(s);
      }
      for (int h = 0; h < H; ++h) {
        apply_rope(c, t, q.data() + size_t(h) * size_t(D), false);
        const int g = h / (H / G);
        std::vector<double> sc(size_t(t + 1));
        double mx = -1e300;
        for (int j = 0; j <= t; ++j) {
          const float* k = r.k_post[size_t(l)].data() + (size_t(j) * size_t(G) + size_t(g)) * size_t(D);
          double d = 0;
          for (int i = 0; i < D; ++i) d += double(q[size_t(h) * size_t(D) + size_t(i)]) * k[i];
          sc[size_t(j)] = d / std::sqrt(double(D));
          mx = std::max(mx, sc[size_t(j)]);
        }
        double z = 0;
        for (double& v : sc) z += (v = std::exp(v - mx));
        sum += sc[0] / z;
        ++count;
      }
    }
    share.push_back(sum / count);
  }
  return share;
}

TEST(SynthOutliers, TheSinkTakesMostOfTheAttentionMass) {
  for (const char* arch : {"llama", "qwen2"}) {
    SCOPED_TRACE(arch);
    const auto plain_m = load(geometry(arch, "")), sink_m = load(geometry(arch, "pairs=3,scale=16,sink=8"));
    const Capture pr = run(plain_m), sr = run(sink_m);
    const std::vector<double> plain = bos_share(plain_m, pr);
    const std::vector<double> sink = bos_share(sink_m, sr);
    auto sd = [](const std::vector<float>& v) {
      double m = 0, q = 0;
      for (float x : v) m += x;
      m /= double(v.size());
      for (float x : v) q += (x - m) * (x - m);
      return std::sqrt(q / double(v.size()));
    };
    std::printf("%s: last-token logit sd plain %.3f, sink %.3f\n", arch, sd(pr.logits), sd(sr.logits));
    // The other tokens keep their signal (a sink that flattened every input would too).
    EXPECT_GT(sd(sr.logits), 0.5 * sd(pr.logits));
    for (size_t l = 0; l < plain.size(); ++l) {
      std::printf("%s layer %zu: BOS attention share plain %.3f, sink=8 %.3f\n", arch, l, plain[l], sink[l]);
      SCOPED_TRACE("layer " + std::to_string(l) + ": plain " + std::to_string(plain[l]) + ", sink " +
                   std::to_string(sink[l]));
      EXPECT_LT(plain[l], 0.25);
      EXPECT_GT(sink[l], 0.9);  // a boost of about 8 nats over at most 65 keys, at every layer
    }
  }
}

}  // namespace
}  // namespace ember::model::outliers_test
