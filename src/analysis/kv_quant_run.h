#pragma once
// One prompt through a planned (quantized) cache, against the native run: the measurement
// `study kv-quant` and its budget search share (analysis/kv_quant_study.h, kv_quant_budget.h).
//
// A prompt t[0..n) is split at Q = n - 1 - C: the C next-token distributions after t[Q..Q+C)
// are compared, each against the native run's (KL(native || planned), top-1, top-k overlap,
// the NLL change of the reference token t[Q+i+1]). How the plan reaches the cache:
// - in-loop (the default): every K/V row is replaced by what the planned cache stores as the
//   engine writes it (ForwardHooks::transform_kv), over the whole prompt, so every later
//   position and layer attends over quantized rows: what llama.cpp does with -ctk/-ctv. And
//   where K is quantized, each query head row is converted to q8_0 as llama.cpp's CPU flash
//   attention converts Q to the vec-dot type of K (ForwardHooks::transform_q;
//   KvCachePlan::apply_query), except in the one-head plans (the conversion is the layer's).
// - prefix: the native f16 cache of t[0..Q) is quantized once, then t[Q..Q+C) are decoded one
//   at a time, each row they write quantized after its own step (the token attends to its own
//   row unquantized). Only the continuation sees quantized rows: not what llama.cpp runs; kept
//   because it is what `kv perturb --quantize` + `kv compare` measure.
#include <cstdint>
#include <vector>

#include "analysis/kv_cache_plan.h"
#include "model/engine.h"

namespace ember::analysis {

enum class KvQuantMode { in_loop, prefix };
const char* kv_quant_mode_name(KvQuantMode m);  // "in-loop" | "prefix"
// Strict: "in-loop" or "prefix", else an error naming `where` and `flag`.
KvQuantMode parse_kv_quant_mode(const std::string& s, const char* where, const char* flag);

// The native run of one prompt.
struct KvQuantReference {
  const std::vector<int32_t>* tokens = nullptr;
  int q = 0, c = 0;                          // Q, C
  model::KvCache native;                     // the native f16 cache of t[0..Q+C)
  // [layer][(Q+C) * n_embd]: the native residual entering each layer, so that an in-loop run
  // whose first quantized layer is f starts there (partial execution composes to the same bits).
  std::vector<std::vector<float>> residual;
  std::vector<float> logits;                 // [C][n_vocab] after t[Q+i]
  std::vector<std::vector<double>> log_p;    // [C][n_vocab] log softmax of logits
  std::vector<std::vector<int32_t>> top;     // [C] top-k indices, sorted
};
// C in 1..n-2 (the caller checks the prompt is long enough).
KvQuantReference make_reference(model::Engine& engine, const std::vector<int32_t>& tokens, int c, int top_k);

// The planned run's logits [C][n_vocab], same positions as ref.logits.
std::vector<float> run_plan(model::Engine& engine, const KvQuantReference& ref, const KvCachePlan& plan,
                            KvQuantMode mode, KvRotation rotation);

// Scores of one plan over (prompt, step) pairs.
struct KvQuantScore {
  std::vector<double> kl;  // every (prompt, step), in order
  int64_t top1_agree = 0;
  double overlap = 0, dnll = 0;  // sums over the steps
  // Adds the C steps of `logits` against `ref`; Error naming `where` on non-finite logits.
  void add(const KvQuantReference& ref, const std::vector<float>& logits, int n_vocab, int top_k,
           const char* where);
  int64_t steps() const { return int64_t(kl.size()); }
};

// Mean, nearest-rank p99 (ceil(0.99 N)-th smallest) and max of a non-empty list.
struct KlSummary {
  double mean = 0, p99 = 0, max = 0;
};
KlSummary summarize_kl(const std::vector<double>& kl);

}  // namespace ember::analysis
