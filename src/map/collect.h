#pragma once
// Collecting calibration statistics: both models run on the same token sequences, and the
// engine's hooks give, per layer and KV head, K before RoPE (after Q/K norm) and V, and the
// residual stream at every layer boundary. Each prompt's rows are folded into the fits'
// sufficient statistics (calibration.h) and dropped before the next prompt runs, so memory
// stays O(d^2) per map whatever the number of prompts. Observing changes no bit.
#include <functional>
#include <memory>
#include <vector>

#include "map/calibration.h"
#include "model/engine.h"

namespace ember::map {

// Runs `engine` over `tokens` in a fresh cache and captures its rows (calibration.h layout).
ModelRows capture_rows(model::Engine& engine, const std::vector<int32_t>& tokens);

struct CollectOptions {
  bool residual = true;  // keep the residual statistics at the boundaries (s, L)
  int threads = 1;       // accumulation threads (the bits do not depend on them)
  std::string progress_label = "collect";  // ember::Progress on a terminal
  // Called with every prompt's rows after they are folded in (the anchor study's joint fit).
  std::function<void(const std::string& prompt_hash, SplitPart part, const ModelRows& src, const ModelRows& tgt)>
      on_prompt;
};

// Builds the calibration statistics over the prompts the split names (calibration prompts
// first, in split order, then evaluation prompts); prompts not in the split are not run.
// Error if a prompt of the split is missing from `prompts`.
CalibrationSet collect_calibration(model::Engine& source, const std::string& source_identity,
                                   model::Engine& target, const std::string& target_identity,
                                   const std::vector<std::vector<int32_t>>& prompts,
                                   const PromptSplit& split, const std::string& tokenizer_identity,
                                   int shared_layers, const CollectOptions& options = {});

}  // namespace ember::map
