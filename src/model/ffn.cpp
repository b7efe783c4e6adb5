// The second half of a layer: O-projection with the residual add, then the MLP (SwiGLU; GELU
// for the study's toy models).
#include "model/engine_impl.h"
#include "ops/activations.h"
#include "ops/norm.h"

namespace ember::model {

namespace {
// x (n*m,) += y (n*m,)
void add_rows(float* x, const float* y, size_t count) {
  for (size_t i = 0; i < count; ++i) x[i] += y[i];
}
}  // namespace

void Engine::Impl::norm_row(const float* x, const float* weight, float* y) const {
  if (cfg.norm == NormKind::layernorm)
    ops::layernorm_row(x, weight, cfg.n_embd, cfg.rms_eps, y);
  else
    ops::rmsnorm_row(x, weight, cfg.n_embd, cfg.rms_eps, y);
}

void Engine::Impl::finish_layer(int layer, int n, int pos0, float* x, const ForwardHooks* hooks) {
  const LayerWeights& L = w.layers[size_t(layer)];
  const int E = cfg.n_embd, F = cfg.n_ff;
  const size_t rows = size_t(n) * E;
  float* o_ = grow(o, rows);
  ops::matmul(L.wo, att.data(), n, o_, pool);  // W_o (E, H*D) @ att (n, H*D) -> (n, E)
  if (hooks && hooks->on_attn_out) hooks->on_attn_out(layer, pos0, n, o_);
  float* xn_ = grow(xn, rows);
  per_tokens(n, [&](int t0, int t1) {
    for (int t = t0; t < t1; ++t) {
      add_rows(x + size_t(t) * E, o_ + size_t(t) * E, size_t(E));
      norm_row(x + size_t(t) * E, L.ffn_norm.data(), xn_ + size_t(t) * E);
    }
  });
  float* u_ = grow(up, size_t(n) * F);
  if (cfg.ffn_activation == FfnActivation::gelu) {
    ops::matmul(L.w_up, xn_, n, u_, pool);  // (F, E) @ (n, E) -> (n, F)
    ops::gelu_row(u_, int64_t(n) * F, u_);
    ops::matmul(L.w_down, u_, n, o_, pool);  // (E, F) @ (n, F) -> (n, E)
  } else {
    float* g_ = grow(gate, size_t(n) * F);
    const ops::WeightMatrix gate_up[2] = {L.w_gate, L.w_up};  // (F, E) @ (n, E) -> (n, F)
    float* const gu[2] = {g_, u_};
    ops::matmul_shared(gate_up, xn_, n, gu, pool);
    per_tokens(n, [&](int t0, int t1) {
      const size_t b = size_t(t0) * F;
      ops::silu_mul_row(g_ + b, u_ + b, int64_t(t1 - t0) * F, g_ + b);
    });
    ops::matmul(L.w_down, g_, n, o_, pool);  // (E, F) @ (n, F) -> (n, E)
  }
  per_tokens(n, [&](int t0, int t1) {
    add_rows(x + size_t(t0) * E, o_ + size_t(t0) * E, size_t(t1 - t0) * E);
  });
}

}  // namespace ember::model
