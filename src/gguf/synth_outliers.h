#pragma once
// K outlier channels and an attention sink for synthetic models (`ember model synth
// --outliers SPEC`): what real models show and random weights do not, so the studies of a
// quantized KV cache (rotation, per-channel effects) can see it on a real geometry.
// The construction and its measured effect: docs/formats/gguf.md, "Outliers and a sink".
//
// Design goals: deterministic (the same spec and seed write the same bytes on every machine);
// the outliers change how K is represented, not what attention computes (each K outlier pair
// is multiplied by `scale` and the matching Q rows divided by it, so q.k is the same product
// up to rounding: RoPE rotates within a pair, and a scalar on a pair commutes with the
// rotation); the sink is an explicit, documented change of the function (BOS attracts
// attention). Non-goals: per-head Q/K norm architectures (qwen3: the norm would undo a scale
// set before it, and its weights are shared by every head), a sink without Q/K biases (the
// query side of the sink is a Q bias), sinks other than BOS.
#include <cstdint>
#include <string>
#include <vector>

namespace ember::gguf {

struct SynthSpec;

struct OutlierSpec {
  int pairs = 0;      // K outlier RoPE pairs per (layer, KV head); 0 = none
  double scale = 1;   // factor on those pairs' K rows (their Q rows divided by it)
  double sink = 0;    // BOS attention-score boost, nats, at layer 0; 0 = no sink
  bool active() const { return pairs > 0 || sink > 0; }
  // "pairs=N,scale=S,sink=G" in any order, each key at most once; pairs and scale go
  // together (pairs >= 1, scale > 1), sink >= 0; at least one effect. Error naming `flag`.
  static OutlierSpec parse(const std::string& text, const char* flag = "--outliers");
  // The canonical spelling (the ember.synth.outliers metadata value), e.g.
  // "pairs=2,scale=20,sink=8"; keys without effect left out.
  std::string text() const;
};

// The resolved construction of one model: which dimensions each effect uses.
struct OutlierPlan {
  OutlierSpec spec;
  int64_t hidden = 0, heads = 0, kv_heads = 0, head_dim = 0;
  bool neox = false;                   // RoPE pairs (i, i + d/2) instead of (2i, 2i+1)
  std::vector<std::vector<int>> pair;  // [layer * kv_heads + g] -> the outlier pair indices
  // The sink: the hidden dim r_k (BOS's embedding only, read by every KV head), the head dim
  // u where queries and the BOS key meet (first dim of the lowest-frequency pair, u2 its
  // partner), the Q bias every query head carries at u, and the K weight reading r_k into u.
  int64_t r_k = -1, u = -1, u2 = -1;
  double a_bos = 0, q_bias = 0, gamma = 0;
  int32_t bos = -1;
  // Pair i's two head dims in this layout.
  int64_t dim0(int i) const { return neox ? i : 2 * i; }
  int64_t dim1(int i) const { return neox ? i + head_dim / 2 : 2 * i + 1; }
  bool is_outlier(int64_t layer, int64_t g, int64_t d) const;
};

// The plan of a resolved spec (resolve_synth_spec); Error naming --outliers when the
// geometry cannot hold it (too many pairs, a per-head Q/K norm).
OutlierPlan plan_outliers(const SynthSpec& spec);

// Applies the plan to one generated row of tensor `name` (GGML row `row` of a tensor whose
// rows have n elements), in place, before it is encoded.
void shape_outlier_row(const OutlierPlan& plan, const std::string& name, uint64_t row, int64_t n, float* out);

}  // namespace ember::gguf
