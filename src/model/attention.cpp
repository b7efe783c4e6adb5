// Self-attention of one layer: projections, Q/K norm, RoPE, the f16 cache write, and the
// canonical attention of every query over the cached rows (docs/numerics.md).
#include <algorithm>
#include <cmath>

#include "model/engine_impl.h"
#include "ops/activations.h"
#include "ops/dot.h"
#include "ops/norm.h"
#include "ops/vec.h"
#include "util/error.h"

namespace ember::model {

namespace {
// y (m,) += b (m,): one token's row.
void add_bias(float* y, const std::vector<float>& b) {
  for (size_t i = 0; i < b.size(); ++i) y[i] += b[i];
}
}  // namespace

void Engine::Impl::project(int layer, const float* x, std::span<const Segment> segs, int n,
                           bool with_q, const ForwardHooks* hooks) {
  const LayerWeights& L = w.layers[size_t(layer)];
  const int E = cfg.n_embd, D = cfg.head_dim, H = cfg.n_heads, G = cfg.n_kv_heads;
  const size_t qd = size_t(H) * D, kd = size_t(G) * D;
  float* xn_ = grow(xn, size_t(n) * E);
  per_tokens(n, [&](int t0, int t1) {
    for (int t = t0; t < t1; ++t)
      norm_row(x + size_t(t) * E, L.attn_norm.data(), xn_ + size_t(t) * E);
  });
  float* q_ = grow(q, size_t(n) * qd);
  float* k_ = grow(k, size_t(n) * kd);
  float* v_ = grow(v, size_t(n) * kd);
  // K, V (and Q) share their input: quantized once, one parallel section.
  if (with_q) {
    const ops::WeightMatrix ws[3] = {L.wq, L.wk, L.wv};
    float* const ys[3] = {q_, k_, v_};
    ops::matmul_shared(ws, xn_, n, ys, pool);
  } else {
    const ops::WeightMatrix ws[2] = {L.wk, L.wv};
    float* const ys[2] = {k_, v_};
    ops::matmul_shared(ws, xn_, n, ys, pool);
  }
  // Per token: biases, Q/K norm, the pre-RoPE copy for the hook, RoPE, the f16 cache write.
  const bool want_kv = hooks && hooks->on_kv;
  const bool transform = hooks && hooks->transform_kv;
  float* kp_ = want_kv ? grow(k_pre, size_t(n) * kd) : nullptr;
  const int half = D / 2;
  per_tokens(n, [&](int t0, int t1) {
    for (int t = t0; t < t1; ++t) {
      float* qt = q_ + size_t(t) * qd;
      float* kt = k_ + size_t(t) * kd;
      float* vt = v_ + size_t(t) * kd;
      if (cfg.qkv_bias) {
        if (with_q) add_bias(qt, L.bq);
        add_bias(kt, L.bk);
        add_bias(vt, L.bv);
      }
      if (cfg.qk_norm) {
        if (with_q)
          for (int h = 0; h < H; ++h)
            ops::rmsnorm_row(qt + size_t(h) * D, L.q_norm.data(), D, cfg.rms_eps, qt + size_t(h) * D);
        for (int g = 0; g < G; ++g)
          ops::rmsnorm_row(kt + size_t(g) * D, L.k_norm.data(), D, cfg.rms_eps, kt + size_t(g) * D);
      }
      if (want_kv) std::copy(kt, kt + kd, kp_ + size_t(t) * kd);
      const float* c = cos.data() + size_t(t) * half;
      const float* s = sin.data() + size_t(t) * half;
      if (with_q)
        for (int h = 0; h < H; ++h) rope.rotate(c, s, qt + size_t(h) * D, false);
      for (int g = 0; g < G; ++g) rope.rotate(c, s, kt + size_t(g) * D, false);
      // The row's own cache and position; prepare() reserved room before this call.
      const Segment& seg = segs[size_t(row_segment[size_t(t)])];
      KvCache& cache = *seg.cache;
      const int pos = seg.pos0 + (t - seg.row0);
      EMBER_DCHECK(pos < cache.capacity);
      if (transform) hooks->transform_kv(layer, pos, kt, vt);
      for (int g = 0; g < G; ++g) {
        ops::f32_to_f16_row(kt + size_t(g) * D, cache.k_row(layer, g, pos), D);
        ops::f32_to_f16_row(vt + size_t(g) * D, cache.v_row(layer, g, pos), D);
      }
    }
  });
  if (want_kv) {
    EMBER_CHECK(segs.size() == 1);  // hooks observe single-sequence calls only
    hooks->on_kv(layer, segs.front().pos0, n, k_pre.data(), k_, v_);
  }
}

// Attention blocked over keys: a task owns one KV head g, a tile of up to kQueryTile query
// tokens and a run of that head's query heads; it converts the f16 cache rows it reads in
// blocks of kKeyBlock keys into a small f32 buffer (exact) and applies each block to every
// query of the task, so the conversion is shared by up to group x kQueryTile queries and
// stays in L1/L2, and nothing is converted per call for the whole cache.
//
// canonical-v1 is kept bit for bit: for each (head, query) the arithmetic is the same as a
// plain two-pass attention over keys 0..len-1 in order — the score of key j is dot_f32(q in
// f16, k_j) * scale; the softmax is softmax_row over all len scores (its max, exp and sum
// are over the whole row, so the reduction order depends on len alone; softmax_exp_rows
// gives its exponentials and sum, the division comes in pass 2); the probabilities
// are rounded to f16; out accumulates fma(p_j, v_j, out) for j = 0, 1, ..., len-1 (the
// second pass walks the V blocks in order). Blocks, tiles and the task split only decide
// when and by which thread each of those fixed operations runs, never their order.
namespace {
constexpr int kKeyBlock = 64;    // keys converted at a time
// Row stride of a transposed key block, in floats: 8 more than the block, so that the rows a
// score chain walks (16 apart) do not all fall in the same few L1 sets (bench_attention, AVX2,
// head_dim 128: 60 -> 78 GFLOP/s).
constexpr int kKeyLd = kKeyBlock + 8;
constexpr int kValueBlockBytes = 16 << 10;  // f32 value rows converted at a time
// Queries per call of ops::axpy_rows_f32_shared (a multiple of its groups: 3 on AVX2, 4 on
// AVX-512).
constexpr int kPassQueries = 12;
constexpr int kQueryTile = 16;   // query tokens per task
// Queries a task needs before transposing its key blocks pays (decode tasks have 1-7).
constexpr int kTransposeQueries = 8;
}  // namespace

void Engine::Impl::attend(int layer, std::span<const Segment> segs, int n_rows, const ForwardHooks* hooks) {
  const bool transform_q = hooks && hooks->transform_q;
  const int D = cfg.head_dim, H = cfg.n_heads, G = cfg.n_kv_heads;
  const int group = H / G;
  const size_t qd = size_t(H) * D;
  const float scale = 1.0f / std::sqrt(float(D));
  float* att_all = grow(att, size_t(n_rows) * qd);
  // Query tiles never straddle two sequences: tile_start[i] is the first tile of segment i.
  std::vector<int> tile_start(segs.size() + 1, 0);
  for (size_t i = 0; i < segs.size(); ++i)
    tile_start[i + 1] = tile_start[i] + (segs[i].n + kQueryTile - 1) / kQueryTile;
  const int tiles = tile_start.back();
  // Split a group's heads across tasks only when there are too few tasks to feed the pool
  // (decode: one tile); which task computes a head never changes its bits.
  int head_parts = 1;
  while (head_parts < group && int64_t(G) * tiles * head_parts < 2 * int64_t(pool.size()))
    ++head_parts;
  const int heads_per_task = (group + head_parts - 1) / head_parts;
  head_parts = (group + heads_per_task - 1) / heads_per_task;
  // Tasks in the order last query tile first (the most keys), then KV head, then head part.
  // A prefill's go one at a time to whichever thread is free, so that the cheap first tiles
  // fill the end of the section; a decode step's few small tasks take one share per thread.
  const int64_t n_tasks = int64_t(G) * tiles * head_parts, per_tile = int64_t(G) * head_parts;
  auto run_tasks = [&](int64_t b, int64_t e) {
    thread_local std::vector<float> scores, sums, qf, kvf, kt;
    thread_local std::vector<uint16_t> half;
    for (int64_t task = b; task < e; ++task) {
      const int global_tile = tiles - 1 - int(task / per_tile);
      const int g = int(task % per_tile / head_parts), part = int(task % head_parts);
      const size_t si = size_t(std::upper_bound(tile_start.begin(), tile_start.end(), global_tile) -
                               tile_start.begin() - 1);
      const Segment& seg = segs[si];
      const KvCache& cache = *seg.cache;
      const int n = seg.n, pos0 = seg.pos0;
      const float* q_ = q.data() + size_t(seg.row0) * qd;
      float* att_ = att_all + size_t(seg.row0) * qd;
      const int tile = global_tile - tile_start[si];
      const int t0 = tile * kQueryTile, t1 = std::min(n, t0 + kQueryTile);
      const int h0 = g * group + part * heads_per_task;
      const int h1 = std::min(g * group + group, h0 + heads_per_task);
      const int nq = (h1 - h0) * (t1 - t0);  // queries of this task, index (h - h0) * nt + t - t0
      const int nt = t1 - t0;
      const int P = pos0 + t1;                // keys visible to the task's last query
      // A non-empty task, and every key row it reads lies in the cache's reserved room.
      EMBER_DCHECK(h0 < h1 && t0 < t1 && P <= cache.capacity);
      if (scores.size() < size_t(nq) * P) scores.resize(size_t(nq) * P);
      if (qf.size() < size_t(nq) * D) qf.resize(size_t(nq) * D);
      if (kvf.size() < size_t(kKeyBlock) * D) kvf.resize(size_t(kKeyBlock) * D);
      if (half.size() < size_t(D)) half.resize(size_t(D));
      // The queries in f16, like the cached keys they meet (docs/numerics.md: the attention
      // products take f16 operands, as llama.cpp's CPU path does).
      for (int h = h0; h < h1; ++h)
        for (int t = t0; t < t1; ++t) {
          float* dst = qf.data() + (size_t(h - h0) * nt + size_t(t - t0)) * D;
          if (transform_q) {
            hooks->transform_q(layer, q_ + size_t(t) * qd + size_t(h) * D, dst);
            continue;
          }
          ops::f32_to_f16_row(q_ + size_t(t) * qd + size_t(h) * D, half.data(), D);
          ops::f16_to_f32_row(half.data(), dst, D);
        }
      // Pass 1: scores, one key block at a time. With enough queries to share it, the block
      // is converted straight into transposed form (kt[d][key]) so the scores of 8 keys come
      // out of one vector chain per canonical lane (ops::dot_f32_keys, the same bits as
      // dot_f32 per key).
      const bool transposed = nq >= kTransposeQueries;
      if (transposed && kt.size() < size_t(kKeyLd) * D) kt.resize(size_t(kKeyLd) * D);
      for (int j0 = 0; j0 < P; j0 += kKeyBlock) {
        const int j1 = std::min(P, j0 + kKeyBlock);
        if (transposed) {
          ops::f16_rows_to_f32_columns(cache.k_row(layer, g, j0), j1 - j0, D, kt.data(), kKeyLd);
        } else {
          for (int j = j0; j < j1; ++j)
            ops::f16_to_f32_row(cache.k_row(layer, g, j), kvf.data() + size_t(j - j0) * D, D);
        }
        // Causal: query qi (token t0 + qi % nt) sees positions [0, pos0 + t], here [j0, jend).
        auto keys_of = [&](int qi) { return std::min(j1, pos0 + t0 + qi % nt + 1) - j0; };
        for (int qi = 0; qi < nq;) {
          const int ka = keys_of(qi);
          if (ka <= 0) {
            ++qi;
            continue;
          }
          float* sc = scores.data() + size_t(qi) * P + j0;
          const float* qh = qf.data() + size_t(qi) * D;
          if (!transposed) {
            ops::dot_f32_rows(qh, kvf.data(), ka, D, scale, sc);
            ++qi;
            continue;
          }
          // Up to four queries per call share the key loads; those that see fewer keys than
          // the group's most also get scores for the extra ones, which land in their rows past
          // their last position and are never read (their softmax and values stop at their own
          // lengths).
          int group_n = 1, keys = ka;
          while (group_n < 4 && qi + group_n < nq && keys_of(qi + group_n) > 0)
            keys = std::max(keys, keys_of(qi + group_n++));
          ops::dot_f32_keys(qh, group_n, kt.data(), keys, D, kKeyLd, scale, sc, P);
          qi += group_n;
        }
      }
      if (hooks && hooks->on_scores)
        for (int h = h0; h < h1; ++h)
          for (int t = t0; t < t1; ++t)
            hooks->on_scores(layer, h, pos0 + t, scores.data() + (size_t(h - h0) * nt + size_t(t - t0)) * P,
                             pos0 + t + 1);
      // The softmax of each query over its whole row (a head's rows together: their sums are
      // chains that ops::softmax_exp_rows overlaps), leaving e_j in the row and its sum in
      // sums; the output rows cleared.
      if (sums.size() < size_t(nq)) sums.resize(size_t(nq));
      for (int h = h0; h < h1; ++h) {
        float* rows[kQueryTile];
        int64_t lens[kQueryTile];
        for (int t = t0; t < t1; ++t) {
          rows[t - t0] = scores.data() + (size_t(h - h0) * nt + size_t(t - t0)) * P;
          lens[t - t0] = pos0 + t + 1;
          float* out = att_ + size_t(t) * qd + size_t(h) * D;
          std::fill(out, out + D, 0.0f);
        }
        ops::softmax_exp_rows(rows, lens, nt, sums.data() + size_t(h - h0) * nt);
      }
      // Pass 2: out += p_j v_j, one value block at a time, keys in increasing order. The
      // block is at most 16 KB of f32, so it stays in L1 (half of it on Zen 3 / Zen 4) while
      // every query of the task walks it; each query's probabilities for the block, e_j / sum
      // rounded to f16 (like the cached values they weigh), are made just before its products
      // (softmax_row's division, where the row is read anyway). The queries that see the whole
      // block go kPassQueries at a time through one call that loads each value row once for
      // several of them; those that end inside it (the block on the diagonal) go alone.
      const int vblock = std::clamp(kValueBlockBytes / (4 * D), 8, kKeyBlock);
      alignas(64) float probs[kPassQueries][kKeyBlock], alone[kKeyBlock];
      const float* ws[kPassQueries];
      float* outs[kPassQueries];
      for (int j0 = 0; j0 < P; j0 += vblock) {
        const int j1 = std::min(P, j0 + vblock);
        ops::f16_to_f32_row(cache.v_row(layer, g, j0), kvf.data(), int64_t(j1 - j0) * D);
        int group_n = 0;
        auto flush = [&] {
          ops::axpy_rows_f32_shared(ws, kvf.data(), j1 - j0, D, outs, group_n);
          group_n = 0;
        };
        for (int qi = 0; qi < nq; ++qi) {
          const int h = h0 + qi / nt, t = t0 + qi % nt;
          const int jend = std::min(j1, pos0 + t + 1);
          // The next query's exponentials for this block, fetched while this query's products
          // run: at long context a task's rows (nq x P floats) are past L2, and the hardware
          // prefetchers do not follow nq rows read a block at a time.
          if (qi + 1 < nq)
            for (int j = j0; j < j1; j += 16) __builtin_prefetch(scores.data() + size_t(qi + 1) * P + j);
          if (jend <= j0) continue;
          float* out = att_ + size_t(t) * qd + size_t(h) * D;
          const float* ex = scores.data() + size_t(qi) * P + j0;
          if (jend < j1) {
            ops::divide_round_f16_row(ex, sums[size_t(qi)], jend - j0, alone);
            ops::axpy_rows_f32(alone, kvf.data(), jend - j0, D, out);
            continue;
          }
          ops::divide_round_f16_row(ex, sums[size_t(qi)], j1 - j0, probs[group_n]);
          ws[group_n] = probs[group_n];
          outs[group_n] = out;
          if (++group_n == kPassQueries) flush();
        }
        if (group_n > 0) flush();
      }
    }
  };
  if (n_rows > kQueryTile) pool.parallel_chunks(n_tasks, 1, run_tasks);
  else pool.parallel_for(n_tasks, run_tasks);
}

}  // namespace ember::model
