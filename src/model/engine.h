#pragma once
// The engine: a deterministic, instrumented CPU forward pass for llama, qwen2 and qwen3.
// Numerics contract "canonical-v1" (docs/numerics.md): logits and K/V are bit-identical for
// any thread count, prefill vs decode, and every SIMD path.
//
// Partial execution is a first-class API: embed(), run_layers(), project_kv() and lm_head()
// are the very steps forward() is made of, so composing them gives the same bits.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/config.h"
#include "model/kv_cache.h"

namespace ember::model {

// Weights and configuration of one GGUF model; immutable and shared by engines and caches.
// Thread-safe: after load() nothing in it changes, so any number of engines, on any threads,
// may share one Model (through the shared_ptr; the mapping lives as long as the last owner).
class Model {
 public:
  // Opens, checks (ModelConfig::from_gguf) and binds the weights of a GGUF file. Error
  // naming the file and the key or tensor on any problem.
  static std::shared_ptr<const Model> load(const std::string& gguf_path);
  // The same from an already parsed file (in-memory models in tests and studies).
  static std::shared_ptr<const Model> load(gguf::GgufFile file);
  virtual ~Model() = default;
  virtual const ModelConfig& config() const = 0;
  virtual const gguf::GgufFile& file() const = 0;
  // The model identity hash (docs/identity.md), hex SHA-256.
  virtual const std::string& identity() const = 0;
};

// Observers of a forward pass. Each is called once per layer per call with the rows of the
// n tokens evaluated, at absolute positions [pos0, pos0 + n). All arrays are f32, row-major.
// Observing never changes a bit of the result; transform_kv, the one member that does, is
// named as such and empty on the canonical path.
struct ForwardHooks {
  // k_pre: [n][n_kv_heads][head_dim] after Q/K norm (qwen3), before RoPE.
  // k_post: same shape, after RoPE (before rounding to the f16 cache).
  // v: [n][n_kv_heads][head_dim] (before rounding to the f16 cache).
  std::function<void(int layer, int pos0, int n, const float* k_pre, const float* k_post,
                     const float* v)> on_kv;
  // [n][n_embd]: the attention output after the O-projection (before the residual add).
  std::function<void(int layer, int pos0, int n, const float* attn_out)> on_attn_out;
  // The raw scores of query head `head` at position `pos` over keys [0, len) (len = pos + 1):
  // q (in f16) . k_j * scale in f32, before the softmax, whose f16 probabilities can hide a
  // changed key. Called from pool threads, each (layer, head, pos) once per forward pass: it
  // must only write state of its own (kv/witness.h hashes them).
  std::function<void(int layer, int head, int pos, const float* scores, int len)> on_scores;
  // [n][n_embd]: the residual stream entering layer `boundary` (boundary == n_layers: the
  // output of the last layer, before the final norm).
  std::function<void(int boundary, int pos0, int n, const float* residual)> on_residual;
  // Not an observer: rewrites each K and V cache row, in place, just before the engine rounds
  // it to the f16 cache, so every later query of every layer attends over what it wrote.
  // k, v: [n_kv_heads * head_dim] f32 of one position of `layer` (K after RoPE), the unit a
  // llama.cpp cache row has; this is how a study makes the engine store what a quantized
  // llama.cpp cache stores (analysis/kv_quant_study.h). Called from pool threads, several
  // positions at once: it must be a pure function of its arguments, so that the result stays
  // independent of the thread count and of prefill vs decode. on_kv sees the rewritten rows.
  // Empty (the default, and on every canonical path): the cache write is canonical-v1's.
  std::function<void(int layer, int pos, float* k, float* v)> transform_kv;
  // Not an observer either: how attention reads each query head row of `layer`. q: [head_dim]
  // f32 after RoPE; out: [head_dim], what the scores are computed from. Empty (canonical): out
  // is q rounded to f16, like the cached keys it meets. A study sets it where llama.cpp's CPU
  // flash attention converts Q to the vec-dot type of a quantized K (q8_0 blocks). Called
  // from pool threads: a pure function of its arguments, like transform_kv.
  std::function<void(int layer, const float* q, float* out)> transform_q;
};

struct EngineOptions {
  int threads = 1;
  // The model's context length (ModelConfig::n_ctx, GGUF `<arch>.context_length`) bounds the
  // positions the engine evaluates; true lifts that bound up to kMaxCachePositions (the
  // `--allow-past-context` flag of the CLI). Results past the context are what the weights
  // compute there, not what the model was trained for.
  bool allow_past_context = false;
};

// One sequence's share of a batched step (Engine::step): its own cache, whose cursor says
// where its tokens go, and the tokens to evaluate there (a prefill chunk or a decode token).
struct SequenceStep {
  KvCache* cache = nullptr;
  std::span<const int32_t> tokens;
  bool want_logits = true;  // the logits of its last token
};

// The most positions any cache holds (2^24), whatever the model says.
inline constexpr int kMaxCachePositions = 1 << 24;

// One caller at a time: an Engine owns the scratch buffers of a forward pass (Impl: q, k, v,
// attention, MLP rows) and a thread pool that every call uses whole, so two threads in
// forward(), run_layers(), project_kv() or lm_head() of one Engine race (the const members
// only read). Concurrent callers each get their own Engine over one shared Model (the
// weights are not copied); a KvCache, likewise, belongs to one call at a time. Which engine
// or how many threads runs a call never changes a bit (canonical-v1).
class Engine {
 public:
  Engine(std::shared_ptr<const Model> model, EngineOptions options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const Model& model() const;
  const ModelConfig& config() const;
  const EngineOptions& options() const;
  // "canonical-v1;weights=<types>;..." recorded in snapshots (docs/numerics.md).
  std::string fingerprint() const;
  // The number of positions this engine evaluates: the model's context length, or
  // kMaxCachePositions with allow_past_context. Every position written is below it.
  int position_limit() const;
  // An empty cache with room for `capacity` positions (1..2^24; at most position_limit() are
  // allocated). Room is only a starting size: the engine grows a cache as it fills.
  KvCache new_cache(int capacity) const;

  // Evaluates tokens at positions [cache.n_pos, cache.n_pos + n), appends their K/V, and
  // advances the cursor. Returns f32 logits: [n][n_vocab] if all_logits, else the last
  // token's [n_vocab]. Grows the cache (geometrically, up to position_limit()) when it lacks
  // room; Error, before anything is evaluated, if a position would reach position_limit().
  std::vector<float> forward(KvCache& cache, std::span<const int32_t> tokens,
                             const ForwardHooks* hooks = nullptr, bool all_logits = false);

  // Evaluates several sequences in one pass, as a server's continuous batching does: every
  // sequence's tokens at its own cache's positions [n_pos, n_pos + n), the matrix products
  // over all rows at once, attention per sequence over its own cache; each cursor advances.
  // Returns the last token's logits [n_vocab] of each sequence with want_logits, in order.
  // Batch invariance (docs/numerics.md): a sequence's logits and K/V are bit-identical to
  // forward() of it alone, whatever else shares the step. Every check (geometry, positions,
  // distinct caches, token ids) happens before anything is evaluated.
  std::vector<float> step(std::span<const SequenceStep> seqs);

  // --- Partial execution (each is exactly the corresponding part of forward) ---
  // x[n][n_embd] = token embeddings.
  void embed(std::span<const int32_t> tokens, float* x) const;
  // Runs layers [first, last) over n tokens at positions [pos0, pos0 + n): x is the residual
  // entering layer `first` and is replaced by the residual leaving layer last-1. Writes those
  // layers' K/V rows at [pos0, pos0 + n); attention reads the cache rows [0, pos0 + n) of each
  // layer. Does not move the cursor (the caller owns cache.n_pos). Grows the cache as forward().
  void run_layers(int first, int last, KvCache& cache, int pos0, int n, float* x,
                  const ForwardHooks* hooks = nullptr);
  // Only the K/V projections of `layer` (attention norm, K/V matmuls, biases, Q/K norm,
  // RoPE) from its input residual x[n][n_embd]; writes rows [pos0, pos0 + n). No attention,
  // no MLP.
  void project_kv(int layer, const float* x, int n, int pos0, KvCache& cache,
                  const ForwardHooks* hooks = nullptr);
  // logits[n][n_vocab] from the residual leaving the last layer (final norm + LM head).
  void lm_head(const float* x, int n, float* logits);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The name and version of the numerics contract implemented by this binary.
inline constexpr const char* kNumericsContract = "canonical-v1";

}  // namespace ember::model
