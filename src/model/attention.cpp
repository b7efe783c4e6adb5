// Self-attention of one layer: projections, Q/K norm, RoPE, the f16 cache write, and the
// canonical attention of every query over the cached rows (docs/numerics.md).
#include <algorithm>
#include <cmath>

#include "model/engine_impl.h"
#include "ops/activations.h"
#include "ops/dot.h"
#include "ops/norm.h"
#include "ops/vec.h"

namespace ember::model {

namespace {
// y (n, m) += b (m,) on every row.
void add_bias(float* y, const std::vector<float>& b, int n) {
  const size_t m = b.size();
  for (int t = 0; t < n; ++t)
    for (size_t i = 0; i < m; ++i) y[size_t(t) * m + i] += b[i];
}
}  // namespace

void Engine::Impl::project(int layer, const float* x, int n, int pos0, KvCache& cache,
                           bool with_q, const ForwardHooks* hooks) {
  const LayerWeights& L = w.layers[size_t(layer)];
  const int E = cfg.n_embd, D = cfg.head_dim, H = cfg.n_heads, G = cfg.n_kv_heads;
  const size_t qd = size_t(H) * D, kd = size_t(G) * D;
  float* xn_ = grow(xn, size_t(n) * E);
  for (int t = 0; t < n; ++t)
    ops::rmsnorm_row(x + size_t(t) * E, L.attn_norm.data(), E, cfg.rms_eps, xn_ + size_t(t) * E);
  float* q_ = grow(q, size_t(n) * qd);
  float* k_ = grow(k, size_t(n) * kd);
  float* v_ = grow(v, size_t(n) * kd);
  if (with_q) ops::matmul(L.wq, xn_, n, q_, pool);
  ops::matmul(L.wk, xn_, n, k_, pool);
  ops::matmul(L.wv, xn_, n, v_, pool);
  if (cfg.qkv_bias) {
    if (with_q) add_bias(q_, L.bq, n);
    add_bias(k_, L.bk, n);
    add_bias(v_, L.bv, n);
  }
  if (cfg.qk_norm) {
    if (with_q)
      for (size_t h = 0; h < size_t(n) * H; ++h)
        ops::rmsnorm_row(q_ + h * D, L.q_norm.data(), D, cfg.rms_eps, q_ + h * D);
    for (size_t h = 0; h < size_t(n) * G; ++h)
      ops::rmsnorm_row(k_ + h * D, L.k_norm.data(), D, cfg.rms_eps, k_ + h * D);
  }
  const bool want_kv = hooks && hooks->on_kv;
  if (want_kv) std::copy(k_, k_ + size_t(n) * kd, grow(k_pre, size_t(n) * kd));
  const int half = D / 2;
  for (int t = 0; t < n; ++t) {
    const float* c = cos.data() + size_t(t) * half;
    const float* s = sin.data() + size_t(t) * half;
    if (with_q)
      for (int h = 0; h < H; ++h) rope.rotate(c, s, q_ + size_t(t) * qd + size_t(h) * D, false);
    for (int g = 0; g < G; ++g) rope.rotate(c, s, k_ + size_t(t) * kd + size_t(g) * D, false);
  }
  if (want_kv) hooks->on_kv(layer, pos0, n, k_pre.data(), k_, v_);
  for (int t = 0; t < n; ++t)
    for (int g = 0; g < G; ++g) {
      ops::f32_to_f16_row(k_ + size_t(t) * kd + size_t(g) * D, cache.k_row(layer, g, pos0 + t), D);
      ops::f32_to_f16_row(v_ + size_t(t) * kd + size_t(g) * D, cache.v_row(layer, g, pos0 + t), D);
    }
}

void Engine::Impl::attend(int layer, int n, int pos0, const KvCache& cache) {
  const int D = cfg.head_dim, H = cfg.n_heads, G = cfg.n_kv_heads;
  const int P = pos0 + n;
  const int group = H / G;
  const size_t qd = size_t(H) * D;
  // The cached rows as f32 (exact conversion), once per layer for all query heads.
  float* kf_ = grow(kf, size_t(G) * P * D);
  float* vf_ = grow(vf, size_t(G) * P * D);
  pool.parallel_for(int64_t(G) * P, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int g = int(i / P), p = int(i % P);
      ops::f16_to_f32_row(cache.k_row(layer, g, p), kf_ + size_t(i) * D, D);
      ops::f16_to_f32_row(cache.v_row(layer, g, p), vf_ + size_t(i) * D, D);
    }
  });
  const float scale = 1.0f / std::sqrt(float(D));
  float* att_ = grow(att, size_t(n) * qd);
  const float* q_ = q.data();
  // One task per (head, query): each output row is owned by exactly one task, and its
  // arithmetic depends only on (q row, cached rows, position), never on n or the split.
  pool.parallel_for(int64_t(H) * n, [&](int64_t b, int64_t e) {
    std::vector<float> scores(static_cast<size_t>(P)), qh(static_cast<size_t>(D));
    std::vector<uint16_t> half(static_cast<size_t>(std::max(P, D)));
    for (int64_t i = b; i < e; ++i) {
      const int h = int(i / n), t = int(i % n);
      const int g = h / group;
      const int len = pos0 + t + 1;  // causal: positions [0, pos0 + t]
      const float* kg = kf_ + size_t(g) * P * D;
      const float* vg = vf_ + size_t(g) * P * D;
      // The query in f16, like the cached keys it meets (docs/numerics.md: the attention
      // products take f16 operands, as llama.cpp's CPU path does).
      ops::f32_to_f16_row(q_ + size_t(t) * qd + size_t(h) * D, half.data(), D);
      ops::f16_to_f32_row(half.data(), qh.data(), D);
      for (int j = 0; j < len; ++j)
        scores[size_t(j)] = ops::dot_f32(qh.data(), kg + size_t(j) * D, D) * scale;
      ops::softmax_row(scores.data(), len);
      // The probabilities in f16, like the cached values they weigh.
      ops::f32_to_f16_row(scores.data(), half.data(), len);
      ops::f16_to_f32_row(half.data(), scores.data(), len);
      float* out = att_ + size_t(t) * qd + size_t(h) * D;
      std::fill(out, out + D, 0.0f);
      for (int j = 0; j < len; ++j) ops::axpy_f32(scores[size_t(j)], vg + size_t(j) * D, out, D);
    }
  });
}

}  // namespace ember::model
