// Engine: forward() and the partial-execution steps it is made of (model/engine.h).
#include "model/engine.h"

#include <algorithm>

#include "gguf/dequantize.h"
#include "model/engine_impl.h"
#include "ops/norm.h"
#include "util/error.h"

namespace ember::model {

Engine::Impl::Impl(std::shared_ptr<const Model> m, EngineOptions opts)
    : model(std::move(m)), cfg(model->config()), w(weights_of(*model)), options(opts),
      pool(opts.threads), rope(cfg) {}

int Engine::Impl::position_limit() const {
  if (options.allow_past_context || cfg.n_ctx > kMaxCachePositions) return kMaxCachePositions;
  return cfg.n_ctx;
}

void Engine::Impl::make_room(KvCache& cache, int pos0, int n, const char* what) const {
  if (cache.n_layers != cfg.n_layers || cache.n_kv_heads != cfg.n_kv_heads ||
      cache.head_dim != cfg.head_dim)
    fail_field(what, "cache geometry",
               std::to_string(cfg.n_layers) + " layers x " + std::to_string(cfg.n_kv_heads) +
                   " KV heads x " + std::to_string(cfg.head_dim),
               std::to_string(cache.n_layers) + " x " + std::to_string(cache.n_kv_heads) +
                   " x " + std::to_string(cache.head_dim));
  if (n < 1) fail_field(what, "token count", ">= 1", std::to_string(n));
  const int64_t end = int64_t(pos0) + int64_t(n);
  const int limit = position_limit();
  if (pos0 < 0 || end > limit)
    fail_field(what, "positions",
               options.allow_past_context || limit < cfg.n_ctx
                   ? "below " + std::to_string(limit) + " (the most a cache holds)"
                   : "below the model's context length " + std::to_string(limit) +
                         " (--allow-past-context to go past it)",
               "[" + std::to_string(pos0) + ", " + std::to_string(end) + ")");
  if (end > cache.capacity)
    cache.reserve(int(std::max<int64_t>(end, std::min<int64_t>(2 * int64_t(cache.capacity), limit))));
}

int Engine::Impl::prepare(std::span<const Segment> segs, const char* what) {
  int rows = 0;
  for (size_t i = 0; i < segs.size(); ++i) {
    const Segment& s = segs[i];
    // Two segments over one cache would interleave their rows: refused, always.
    for (size_t j = 0; j < i; ++j)
      if (segs[j].cache == s.cache)
        fail_field(what, "sequences", "one cache per sequence",
                   "sequences " + std::to_string(j) + " and " + std::to_string(i) + " share one");
    EMBER_CHECK(s.cache && s.row0 == rows);
    make_room(*s.cache, s.pos0, s.n, what);
    rows += s.n;
  }
  const size_t half = size_t(cfg.head_dim / 2);
  grow(cos, size_t(rows) * half);
  grow(sin, size_t(rows) * half);
  row_segment.resize(size_t(rows));
  for (size_t i = 0; i < segs.size(); ++i)
    for (int t = 0; t < segs[i].n; ++t) {
      const size_t r = size_t(segs[i].row0 + t);
      row_segment[r] = int(i);
      rope.cos_sin(segs[i].pos0 + t, cos.data() + r * half, sin.data() + r * half);
    }
  return rows;
}

void Engine::Impl::run_layers(int first, int last, std::span<const Segment> segs, int rows,
                              float* x, const ForwardHooks* hooks) {
  const int pos0 = segs.front().pos0;  // for the hooks, which observe one segment
  for (int l = first; l < last; ++l) {
    if (hooks && hooks->on_residual) hooks->on_residual(l, pos0, rows, x);
    project(l, x, segs, rows, true, hooks);
    attend(l, segs, rows, hooks);
    finish_layer(l, rows, pos0, x, hooks);
  }
  if (hooks && hooks->on_residual) hooks->on_residual(last, pos0, rows, x);
}

Engine::Engine(std::shared_ptr<const Model> model, EngineOptions options) {
  if (!model) fail("engine", "no model");
  if (options.threads < 1 || options.threads > 1024)
    fail_field("engine", "threads", "1..1024", std::to_string(options.threads));
  impl_ = std::make_unique<Impl>(std::move(model), options);
}

Engine::~Engine() = default;

const Model& Engine::model() const { return *impl_->model; }
const ModelConfig& Engine::config() const { return impl_->cfg; }
const EngineOptions& Engine::options() const { return impl_->options; }

namespace {
// How activations enter the matmul for these weight types (ops/matmul.h): f32 for float
// weights, 8-bit blocks of 32 (q8_0) for the *_0/*_1 types, of 256 (q8_K) for the K types.
std::string activation_scheme(const std::vector<std::string>& types) {
  bool f = false, q0 = false, qk = false;
  for (const std::string& t : types) {
    if (t == "f32" || t == "f16" || t == "bf16") f = true;
    else if (t.size() > 2 && t.substr(t.size() - 2) == "_K") qk = true;
    else q0 = true;
  }
  std::string s;
  auto add = [&](const char* part) { s += (s.empty() ? "" : "+") + std::string(part); };
  if (f) add("f32");
  if (q0) add("q8_0");
  if (qk) add("q8_K");
  return s;
}
}  // namespace

std::string Engine::fingerprint() const {
  std::string s = std::string(kNumericsContract) + ";weights=";
  const auto& types = impl_->w.matrix_types;
  for (size_t i = 0; i < types.size(); ++i) s += (i ? "," : "") + types[i];
  s += ";activations=" + activation_scheme(types) + ";kv=f16;attention=f16-operands";
  return s;
}

int Engine::position_limit() const { return impl_->position_limit(); }

KvCache Engine::new_cache(int capacity) const {
  const ModelConfig& c = impl_->cfg;
  if (capacity < 1 || capacity > kMaxCachePositions)
    fail_field("cache", "capacity", "1..2^24 positions", std::to_string(capacity));
  return KvCache(c.n_layers, c.n_kv_heads, c.head_dim, std::min(capacity, position_limit()));
}

void Engine::embed(std::span<const int32_t> tokens, float* x) const {
  const ModelConfig& c = impl_->cfg;
  const ops::WeightMatrix& e = impl_->w.token_embd;
  for (size_t t = 0; t < tokens.size(); ++t) {
    const int32_t id = tokens[t];
    if (id < 0 || id >= c.n_vocab)
      fail_field("embed", "token id", "in [0, " + std::to_string(c.n_vocab) + ")",
                 std::to_string(id));
    const uint64_t row_bytes = gguf::row_bytes(e.type, uint64_t(e.cols));
    gguf::dequantize_row(e.type, e.data + uint64_t(id) * row_bytes, x + t * size_t(c.n_embd),
                         c.n_embd);
  }
}

void Engine::run_layers(int first, int last, KvCache& cache, int pos0, int n, float* x,
                        const ForwardHooks* hooks) {
  Impl& I = *impl_;
  if (first < 0 || last > I.cfg.n_layers || first > last)
    fail_field("run_layers", "layer range",
               "0 <= first <= last <= " + std::to_string(I.cfg.n_layers),
               "[" + std::to_string(first) + ", " + std::to_string(last) + ")");
  const Segment seg{&cache, pos0, n, 0};
  I.prepare({&seg, 1}, "run_layers");
  I.run_layers(first, last, {&seg, 1}, n, x, hooks);
}

void Engine::project_kv(int layer, const float* x, int n, int pos0, KvCache& cache,
                        const ForwardHooks* hooks) {
  Impl& I = *impl_;
  if (layer < 0 || layer >= I.cfg.n_layers)
    fail_field("project_kv", "layer", "in [0, " + std::to_string(I.cfg.n_layers) + ")",
               std::to_string(layer));
  const Segment seg{&cache, pos0, n, 0};
  I.prepare({&seg, 1}, "project_kv");
  I.project(layer, x, {&seg, 1}, n, false, hooks);
}

void Engine::lm_head(const float* x, int n, float* logits) {
  Impl& I = *impl_;
  const int E = I.cfg.n_embd;
  float* xn = grow(I.xn, size_t(n) * E);
  for (int t = 0; t < n; ++t)
    I.norm_row(x + size_t(t) * E, I.w.output_norm.data(), xn + size_t(t) * E);
  ops::matmul(I.w.output, xn, n, logits, I.pool);  // (V, E) @ (n, E) -> (n, V)
}

std::vector<float> Engine::forward(KvCache& cache, std::span<const int32_t> tokens,
                                   const ForwardHooks* hooks, bool all_logits) {
  Impl& I = *impl_;
  const int n = int(tokens.size());
  if (tokens.size() > size_t(kMaxCachePositions))
    fail_field("forward", "token count", "<= 2^24", std::to_string(tokens.size()));
  I.make_room(cache, cache.n_pos, n, "forward");
  const int pos0 = cache.n_pos;
  const int E = I.cfg.n_embd, V = I.cfg.n_vocab;
  std::vector<float> x(size_t(n) * E);
  embed(tokens, x.data());
  run_layers(0, I.cfg.n_layers, cache, pos0, n, x.data(), hooks);
  cache.n_pos = pos0 + n;
  if (all_logits) {
    std::vector<float> logits(size_t(n) * V);
    lm_head(x.data(), n, logits.data());
    return logits;
  }
  std::vector<float> logits(static_cast<size_t>(V));
  lm_head(x.data() + size_t(n - 1) * E, 1, logits.data());
  return logits;
}

}  // namespace ember::model

namespace ember::model {

std::vector<float> Engine::step(std::span<const SequenceStep> seqs) {
  Impl& I = *impl_;
  const int E = I.cfg.n_embd, V = I.cfg.n_vocab;
  if (seqs.empty()) fail_field("step", "sequences", ">= 1", "0");
  std::vector<Segment> segs;
  segs.reserve(seqs.size());
  int64_t rows = 0;
  for (const SequenceStep& s : seqs) {
    if (!s.cache) fail_field("step", "cache", "one per sequence", "none");
    if (s.tokens.empty()) fail_field("step", "token count", ">= 1", "0");
    if (rows + int64_t(s.tokens.size()) > kMaxCachePositions)
      fail_field("step", "token count", "<= 2^24 in one step", std::to_string(rows + s.tokens.size()));
    segs.push_back({s.cache, s.cache->n_pos, int(s.tokens.size()), int(rows)});
    rows += int64_t(s.tokens.size());
  }
  I.prepare(segs, "step");  // every check before anything is evaluated
  std::vector<float> x(size_t(rows) * E);
  for (size_t i = 0; i < seqs.size(); ++i)
    embed(seqs[i].tokens, x.data() + size_t(segs[i].row0) * E);
  I.run_layers(0, I.cfg.n_layers, segs, int(rows), x.data(), nullptr);
  // The last row of each sequence that wants logits, through the LM head together.
  std::vector<float> last;
  int n_logits = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    seqs[i].cache->n_pos = segs[i].pos0 + segs[i].n;
    if (!seqs[i].want_logits) continue;
    const float* r = x.data() + size_t(segs[i].row0 + segs[i].n - 1) * E;
    last.insert(last.end(), r, r + E);
    ++n_logits;
  }
  std::vector<float> logits(size_t(n_logits) * V);
  if (n_logits) lm_head(last.data(), n_logits, logits.data());
  return logits;
}

}  // namespace ember::model
