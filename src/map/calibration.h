#pragma once
// Calibration statistics for cache translation (format ember.map-calibration.v2,
// docs/mapping.md).
//
// Both models are run on the same token sequences, prompt by prompt; each prompt's rows (one
// per token position) are folded into the sufficient statistics of every fit and then
// dropped, so memory is O(d^2) per map, not O(tokens). Per least-squares problem and per side
// of the frozen split (calibration, evaluation) the set holds a NormalEquations (ridge.h):
//   K, V      per layer and KV head: source K (pre-RoPE, after Q/K norm) or V -> the target's
//   residual  per boundary b in (s, L) (when collected): source residual entering layer b ->
//             the target's
// A fit reads only the calibration side; the evaluation side scores the fitted maps (held-out
// R²) and never enters a solve. Every prompt names its hash and its side of the split, and
// adding a prompt checks it against the split (PromptSplit::check_fit_prompt for the
// calibration side), so an evaluation prompt can never reach a fit.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "map/ridge.h"
#include "map/split.h"
#include "util/json_fields.h"

namespace ember {
class ThreadPool;
}

namespace ember::map {

inline constexpr const char* kCalibrationFormat = "ember.map-calibration.v2";
// The representation states the rows are in (recorded, and checked on read).
inline constexpr const char* kKeyState = "pre-rope-after-qk-norm";
inline constexpr const char* kValueState = "v-projection";

// What a mapper or calibration set needs to know about one model.
struct ModelGeometry {
  std::string identity;  // model identity hash (hex)
  std::string arch;
  int n_layers = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int n_embd = 0;

  nlohmann::json to_json() const;
  // Strict: exactly these six keys (errors name o's file and path, e.g. "source.n_layers").
  static ModelGeometry from_json(StrictObject o);
  bool same_shape(const ModelGeometry& o) const {
    return n_layers == o.n_layers && n_kv_heads == o.n_kv_heads && head_dim == o.head_dim &&
           n_embd == o.n_embd;
  }
};

// One model's rows for one prompt of n tokens:
//   k, v [layer][kv_head][row][head_dim], res [boundary 0..L][row][n_embd].
struct ModelRows {
  int n_rows = 0;
  std::vector<float> k, v, res;
};

// A prompt folded into the statistics.
struct CalibPrompt {
  std::string prompt_hash;
  SplitPart part = SplitPart::calib;
  int rows = 0;
};

struct CalibrationSet {
  ModelGeometry source, target;
  std::string tokenizer_identity;
  int shared_layers = 0;  // s: layers [0, s) and the embeddings are byte-identical
  PromptSplit split;
  bool residual = false;  // residual statistics at the boundaries (s, L) are kept
  std::vector<CalibPrompt> prompts;  // in the order they were added
  // [part][...]: part 0 = calibration, 1 = evaluation.
  std::vector<NormalEquations> k[2], v[2];  // [layer * n_kv_heads + head]
  std::vector<NormalEquations> res[2];      // [boundary - s - 1], boundaries s+1 .. L-1

  // An empty set (every statistic zero) for these models and this split.
  static CalibrationSet empty(const ModelGeometry& source, const ModelGeometry& target,
                              const std::string& tokenizer_identity, int shared_layers, const PromptSplit& split,
                              bool residual);

  const NormalEquations& k_stats(SplitPart p, int layer, int head) const {
    return k[int(p)][size_t(layer) * target.n_kv_heads + head];
  }
  const NormalEquations& v_stats(SplitPart p, int layer, int head) const {
    return v[int(p)][size_t(layer) * target.n_kv_heads + head];
  }
  // The residual statistics at boundary b in (s, L); nullptr when not collected.
  const NormalEquations* res_stats(SplitPart p, int boundary) const;
  int64_t rows(SplitPart p) const { return k[int(p)].empty() ? 0 : k[int(p)][0].rows(); }
  size_t n_prompts(SplitPart p) const;

  // Folds one prompt's rows (both models, same tokens) into the statistics of its side. The
  // gate: a calibration prompt must be one of the split's calibration prompts (an evaluation
  // prompt is refused by name, PromptSplit::check_fit_prompt), an evaluation prompt one of its
  // evaluation prompts, and no prompt twice. The problems are independent and each adds its
  // rows in order, so `pool` (may be null) changes who computes, never a bit.
  void add_prompt(const std::string& prompt_hash, SplitPart part, const ModelRows& src, const ModelRows& tgt,
                  ThreadPool* pool, const std::string& where);

  // Consistency: geometry > 0 and matching layer/head counts, statistics sized by the
  // geometry, every prompt's part agrees with the split, no prompt twice, each side's row
  // count equals the sum of its prompts' rows (and G's ones entry), finite statistics. Error
  // naming `where` and the field.
  void validate(const std::string& where) const;

  // Directory with manifest.json and stats.f64le; atomic, refuses to overwrite without force.
  void write(const std::string& dir, bool force) const;
  // Strict read: format (v1 row sets are refused by name), payload size (checked against the
  // geometry before anything is allocated) and SHA-256, validate().
  static CalibrationSet read(const std::string& dir);
  // The same read over bytes already in memory (the fuzz target's entry point).
  static CalibrationSet parse(const std::string& manifest_text, const uint8_t* payload, size_t payload_size,
                              const std::string& mpath, const std::string& ppath);
};

}  // namespace ember::map
