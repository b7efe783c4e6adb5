#pragma once
// Diagnostics of `kv compare` with the model loaded (docs/compare.md, "diagnostics").
//
// Same-input phase: both caches are restored into one model and fed one shared token path,
// the reference-greedy path of LEFT (its resume token, then LEFT's own argmax at each step).
// Per step and per layer it compares the attention output after the O-projection, and per
// step the full logits, top-1 agreement and the first prediction disagreement. Since both
// sides see the same inputs, every activation difference comes from the caches.
//
// Independent greedy phase: both clean caches are restored again and each follows its own
// argmax from its own resume token for K steps. Only the token sequences are compared (the
// inputs differ after a divergence, so activations are not).
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analysis/compare_state.h"
#include "model/engine.h"

namespace ember::analysis {

// Two f32 vectors (LEFT a, RIGHT b) compared in f64, summed in element order.
struct VectorCompare {
  double cosine = 0;                    // <a,b>/(|a||b|); 1 if both zero, 0 if one is
  std::optional<double> rel_error;      // |b-a| / |a|; absent when |a| == 0 and b != a
  double max_abs = 0;                   // max |b-a|
};
VectorCompare compare_vectors(const float* a, const float* b, size_t n);

struct SameInputStep {
  int step = 0;
  int position = 0;              // absolute position of the input token
  int32_t input_token = 0;       // the shared input (LEFT's path)
  std::vector<VectorCompare> attn_out;  // [layer]: attention output after the O-projection
  VectorCompare logits;          // the full logits after this input
  // KL(softmax(LEFT) || softmax(RIGHT)) of these logits, in nats (util/kl.h); absent when a
  // logit is not finite.
  std::optional<double> logits_kl;
  int32_t top1_left = 0, top1_right = 0;  // argmax, lowest index on ties
};

struct SameInputPhase {
  std::vector<SameInputStep> steps;
  int top1_agreement = 0;                 // steps whose top-1 agree
  std::optional<double> mean_kl, max_kl;  // over the steps (absent if any step's KL is)
  std::optional<int> first_disagreement;  // first step whose top-1 differ
};

struct GreedyPhase {
  // Each side's own path: element 0 is its resume token (position P), element i > 0 the
  // argmax after evaluating element i-1. steps + 1 tokens.
  std::vector<int32_t> left, right;
  int agreeing_prefix = 0;               // leading tokens that agree
  std::optional<int> first_divergence;   // index of the first differing token
  bool identical() const { return !first_divergence; }
};

struct Diagnostics {
  std::string model_identity;  // the loaded model (LEFT's)
  int steps = 0;
  SameInputPhase same_input;
  GreedyPhase greedy;
};

struct DiagnosticsOptions {
  int steps = 8;
};

// What the diagnostics need of a model: one decode step. forward(cache, token, hooks)
// evaluates `token` at position cache.n_pos, appends its K/V, advances the cursor, reports
// each layer's attention output through hooks->on_attn_out (n = 1), and returns the logits
// [n_vocab]. The engine is one (diagnostics_engine.cpp); tests can plug a toy model.
struct DiagnosticModel {
  std::string identity;  // model identity hash; must be LEFT's
  int n_layers = 0, n_kv_heads = 0, head_dim = 0, n_embd = 0, n_vocab = 0;
  std::function<std::vector<float>(model::KvCache&, int32_t, const model::ForwardHooks*)> forward;
};

// Runs both phases. Error naming the field when LEFT is not the model's, the geometry
// differs from the model's, a resume token is out of range, or steps is not in 1..4096.
// The caller has checked alignment. RIGHT may come from another model of the same geometry
// (a crossing comparison): it is still evaluated by LEFT's model.
Diagnostics run_diagnostics(const DiagnosticModel& model, const ComparedState& left,
                            const ComparedState& right, const DiagnosticsOptions& options);

// The same on the engine (one token per forward call).
Diagnostics run_diagnostics(model::Engine& engine, const ComparedState& left,
                            const ComparedState& right, const DiagnosticsOptions& options);

}  // namespace ember::analysis
