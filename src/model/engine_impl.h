#pragma once
// Internals of Engine shared by engine.cpp, attention.cpp and ffn.cpp. Not a public header.
//
// Shapes below: n = tokens in the call, E = n_embd, H = n_heads, G = n_kv_heads,
// D = head_dim, F = n_ff, P = pos0 + n (positions visible to the last query).
#include <span>
#include <vector>

#include "model/engine.h"
#include "model/rope.h"
#include "model/weights.h"
#include "util/thread_pool.h"

namespace ember::model {

// One sequence's rows in a call: its cache, the absolute position of its first row, its row
// count, and where its rows start in the call's activations (x, q, k, v, att). A single-
// sequence call is one segment at row 0; a batched step (Engine::step) has one per sequence,
// each with its own cache. Every per-row operation reads its row's segment, so a row's bits
// never depend on the other segments (batch invariance, docs/numerics.md).
struct Segment {
  KvCache* cache = nullptr;
  int pos0 = 0;
  int n = 0;
  int row0 = 0;
};

struct Engine::Impl {
  Impl(std::shared_ptr<const Model> m, EngineOptions opts);

  std::shared_ptr<const Model> model;
  const ModelConfig& cfg;
  const ModelWeights& w;
  EngineOptions options;
  ThreadPool pool;
  RopeTable rope;

  // Scratch, grown on demand and reused (an Engine runs one call at a time).
  std::vector<float> xn;      // (n, E) normed input of a block
  std::vector<float> q;       // (n, H*D)
  std::vector<float> k, v;    // (n, G*D)
  std::vector<float> k_pre;   // (n, G*D) copy for hooks
  std::vector<float> att;     // (n, H*D) attention output before the O-projection
  std::vector<float> o;       // (n, E)
  std::vector<float> gate, up;  // (n, F)
  std::vector<float> cos, sin;  // (n, D/2) RoPE of each row's position
  std::vector<int> row_segment;   // (n,) the segment of each row

  // fn(t0, t1) over token ranges covering [0, n), split across the pool when a call has
  // enough tokens to pay for the hand-off (prefill). For per-token elementwise work only
  // (norms, biases, RoPE, the cache write, SwiGLU): which thread runs a token never changes
  // its bits.
  template <class Fn>
  void per_tokens(int n, Fn&& fn) {
    if (n < kParallelTokens || pool.size() == 1) {
      fn(0, n);
      return;
    }
    pool.parallel_for(n, [&](int64_t b, int64_t e) { fn(int(b), int(e)); });
  }
  static constexpr int kParallelTokens = 32;

  // The block/output norm of this model (RMSNorm, or LayerNorm for the toy models). x, y (E,).
  void norm_row(const float* x, const float* weight, float* y) const;
  // Checks the cache geometry and that [pos0, pos0 + n) lies below position_limit(), then
  // grows the cache to hold those positions (doubling, capped at the limit).
  void make_room(KvCache& cache, int pos0, int n, const char* what) const;
  int position_limit() const;
  // make_room for every segment, then the RoPE tables and row_segment of the call's rows.
  // Returns the call's row count.
  int prepare(std::span<const Segment> segs, const char* what);
  // Attention norm, Q (optional), K, V projections with biases, Q/K norm, RoPE, the K/V
  // hook (one segment only), and the f16 cache write of each segment's rows at [pos0,
  // pos0+n) of its cache. x (rows, E).
  void project(int layer, const float* x, std::span<const Segment> segs, int rows, bool with_q,
               const ForwardHooks* hooks);
  // att (rows, H*D) from q: each segment's queries over its own cache rows [0, pos0+n).
  // hooks: only transform_q is read (the query rows as attention reads them).
  void attend(int layer, std::span<const Segment> segs, int rows, const ForwardHooks* hooks);
  // x += W_o att; x += FFN(x). pos0 is only reported to the hooks.
  void finish_layer(int layer, int n, int pos0, float* x, const ForwardHooks* hooks);
  // Layers [first, last) over the call's rows (prepare() done by the caller).
  void run_layers(int first, int last, std::span<const Segment> segs, int rows, float* x,
                  const ForwardHooks* hooks);
};

// Grows v to at least n elements (never shrinks; contents unspecified).
inline float* grow(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

}  // namespace ember::model
