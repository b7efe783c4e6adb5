#include "model/reference_forward.h"

#include <cmath>
#include <map>
#include <string>

#include "gguf/dequantize.h"
#include "util/f16.h"

namespace ember::test {

namespace {

using Vec = std::vector<double>;

struct Mat {  // rows x cols, row-major: y = W x with W[r][c]
  int rows = 0, cols = 0;
  Vec w;
};

Mat load(const gguf::GgufFile& f, const std::string& name) {
  const gguf::TensorInfo& t = f.tensor(name);
  const std::vector<float> v = gguf::dequantize_tensor(t);
  Mat m;
  m.cols = int(t.shape[0]);
  m.rows = t.shape.size() > 1 ? int(t.shape[1]) : 1;
  m.w.assign(v.begin(), v.end());
  return m;
}

Vec matvec(const Mat& m, const Vec& x) {
  Vec y(size_t(m.rows), 0.0);
  for (int r = 0; r < m.rows; ++r) {
    double s = 0;
    for (int c = 0; c < m.cols; ++c) s += m.w[size_t(r) * m.cols + c] * x[size_t(c)];
    y[size_t(r)] = s;
  }
  return y;
}

Vec rmsnorm(const Vec& x, const Vec& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double s = 1.0 / std::sqrt(ss / double(x.size()) + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * s * w[i];
  return y;
}

}  // namespace

std::vector<double> reference_logits(const gguf::GgufFile& f, const std::vector<int32_t>& tokens,
                                     bool f16_attention,
                                     std::vector<std::vector<double>>* residuals) {
  // Rounds through f16 (via f32, as the engine stores a computed f32).
  auto r16 = [&](double& z) {
    if (f16_attention) z = f16_to_f32(f32_to_f16(float(z)));
  };
  const std::string arch = f.get_string("general.architecture");
  const std::string p = arch + ".";
  const int L = int(f.get_int(p + "block_count"));
  const int E = int(f.get_int(p + "embedding_length"));
  const int H = int(f.get_int(p + "attention.head_count"));
  const int G = int(f.get_int_or(p + "attention.head_count_kv", H));
  const int D = int(f.get_int_or(p + "attention.key_length", E / H));
  const double eps = f.get_float_or(p + "attention.layer_norm_rms_epsilon", 1e-5);
  const double theta = f.get_float_or(p + "rope.freq_base", arch == "llama" ? 1e4 : 1e6);
  const bool neox = arch != "llama";
  const std::string scaling = f.get_string_or(p + "rope.scaling.type", "none");
  const double factor = f.get_float_or(p + "rope.scaling.factor", 1.0);

  // Per-pair frequencies, with the scaling recomputed here from its definition.
  Vec freq(size_t(D / 2));
  for (int i = 0; i < D / 2; ++i) {
    double fr = std::pow(theta, -2.0 * i / D);
    if (scaling == "linear") fr /= factor;
    if (scaling == "llama3") {
      const double orig = double(f.get_int(p + "rope.scaling.original_context_length"));
      const double lo = f.get_float_or(p + "rope.scaling.low_freq_factor", 1.0);
      const double hi = f.get_float_or(p + "rope.scaling.high_freq_factor", 4.0);
      const double wavelen = 2 * M_PI / fr;
      if (wavelen > orig / lo) fr /= factor;
      else if (wavelen >= orig / hi) {
        const double smooth = (orig / wavelen - lo) / (hi - lo);
        fr = (1 - smooth) * fr / factor + smooth * fr;
      }
    }
    freq[size_t(i)] = fr;
  }
  auto rope = [&](double* head, int pos) {
    for (int i = 0; i < D / 2; ++i) {
      const int a = neox ? i : 2 * i, b = neox ? i + D / 2 : 2 * i + 1;
      const double c = std::cos(pos * freq[size_t(i)]), s = std::sin(pos * freq[size_t(i)]);
      const double x0 = head[a], x1 = head[b];
      head[a] = x0 * c - x1 * s;
      head[b] = x0 * s + x1 * c;
    }
  };
  auto vec = [&](const std::string& name) { return load(f, name).w; };
  auto has = [&](const std::string& name) { return f.find_tensor(name) != nullptr; };

  const Mat embd = load(f, "token_embd.weight");
  const Mat out = has("output.weight") ? load(f, "output.weight") : embd;
  const Vec out_norm = vec("output_norm.weight");
  const int n = int(tokens.size());
  const int V = embd.rows;

  std::vector<Vec> x(static_cast<size_t>(n));
  for (int t = 0; t < n; ++t)
    x[size_t(t)].assign(embd.w.begin() + int64_t(tokens[size_t(t)]) * E,
                        embd.w.begin() + int64_t(tokens[size_t(t)] + 1) * E);
  auto record = [&] {
    if (!residuals) return;
    residuals->emplace_back();
    for (const Vec& r : x) residuals->back().insert(residuals->back().end(), r.begin(), r.end());
  };
  if (residuals) residuals->clear();
  for (int l = 0; l < L; ++l) {
    record();
    const std::string b = "blk." + std::to_string(l) + ".";
    const Mat wq = load(f, b + "attn_q.weight"), wk = load(f, b + "attn_k.weight"),
              wv = load(f, b + "attn_v.weight"), wo = load(f, b + "attn_output.weight");
    const Mat wg = load(f, b + "ffn_gate.weight"), wu = load(f, b + "ffn_up.weight"),
              wd = load(f, b + "ffn_down.weight");
    const Vec an = vec(b + "attn_norm.weight"), fn = vec(b + "ffn_norm.weight");
    const bool bias = has(b + "attn_q.bias"), qkn = has(b + "attn_q_norm.weight");
    std::vector<Vec> q(static_cast<size_t>(n)), k(static_cast<size_t>(n)), v(static_cast<size_t>(n));
    for (int t = 0; t < n; ++t) {
      const Vec xn = rmsnorm(x[size_t(t)], an, eps);
      q[size_t(t)] = matvec(wq, xn);
      k[size_t(t)] = matvec(wk, xn);
      v[size_t(t)] = matvec(wv, xn);
      if (bias) {
        const Vec bq = vec(b + "attn_q.bias"), bk = vec(b + "attn_k.bias"), bv = vec(b + "attn_v.bias");
        for (size_t i = 0; i < bq.size(); ++i) q[size_t(t)][i] += bq[i];
        for (size_t i = 0; i < bk.size(); ++i) k[size_t(t)][i] += bk[i];
        for (size_t i = 0; i < bv.size(); ++i) v[size_t(t)][i] += bv[i];
      }
      if (qkn) {
        const Vec qn = vec(b + "attn_q_norm.weight"), kn = vec(b + "attn_k_norm.weight");
        for (int h = 0; h < H; ++h) {
          Vec head(q[size_t(t)].begin() + h * D, q[size_t(t)].begin() + (h + 1) * D);
          head = rmsnorm(head, qn, eps);
          std::copy(head.begin(), head.end(), q[size_t(t)].begin() + h * D);
        }
        for (int g = 0; g < G; ++g) {
          Vec head(k[size_t(t)].begin() + g * D, k[size_t(t)].begin() + (g + 1) * D);
          head = rmsnorm(head, kn, eps);
          std::copy(head.begin(), head.end(), k[size_t(t)].begin() + g * D);
        }
      }
      for (int h = 0; h < H; ++h) rope(q[size_t(t)].data() + h * D, t);
      for (int g = 0; g < G; ++g) rope(k[size_t(t)].data() + g * D, t);
      for (double& z : q[size_t(t)]) r16(z);
      for (double& z : k[size_t(t)]) r16(z);
      for (double& z : v[size_t(t)]) r16(z);
    }
    for (int t = 0; t < n; ++t) {
      Vec att(size_t(H) * D, 0.0);
      for (int h = 0; h < H; ++h) {
        const int g = h / (H / G);
        Vec s(size_t(t) + 1);
        double m = -INFINITY;
        for (int j = 0; j <= t; ++j) {
          double d = 0;
          for (int i = 0; i < D; ++i) d += q[size_t(t)][size_t(h * D + i)] * k[size_t(j)][size_t(g * D + i)];
          s[size_t(j)] = d / std::sqrt(double(D));
          m = std::max(m, s[size_t(j)]);
        }
        double sum = 0;
        for (double& e : s) sum += (e = std::exp(e - m));
        for (double& e : s) {
          e /= sum;
          r16(e);
        }
        sum = 1.0;
        for (int j = 0; j <= t; ++j)
          for (int i = 0; i < D; ++i)
            att[size_t(h * D + i)] += s[size_t(j)] / sum * v[size_t(j)][size_t(g * D + i)];
      }
      const Vec o = matvec(wo, att);
      for (int i = 0; i < E; ++i) x[size_t(t)][size_t(i)] += o[size_t(i)];
      const Vec xn = rmsnorm(x[size_t(t)], fn, eps);
      Vec gate = matvec(wg, xn);
      const Vec up = matvec(wu, xn);
      for (size_t i = 0; i < gate.size(); ++i) gate[i] = gate[i] / (1 + std::exp(-gate[i])) * up[i];
      const Vec d = matvec(wd, gate);
      for (int i = 0; i < E; ++i) x[size_t(t)][size_t(i)] += d[size_t(i)];
    }
  }
  record();
  std::vector<double> logits(size_t(n) * V);
  for (int t = 0; t < n; ++t) {
    const Vec y = matvec(out, rmsnorm(x[size_t(t)], out_norm, eps));
    std::copy(y.begin(), y.end(), logits.begin() + int64_t(t) * V);
  }
  return logits;
}

}  // namespace ember::test
