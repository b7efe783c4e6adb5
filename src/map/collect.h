#pragma once
// Collecting calibration rows: both models run on the same token sequences, and the engine's
// hooks give, per layer and KV head, K before RoPE (after Q/K norm) and V, and the residual
// stream at every layer boundary (format: calibration.h). Observing changes no bit.
#include <memory>
#include <vector>

#include "map/calibration.h"
#include "model/engine.h"

namespace ember::map {

// One model's rows for one prompt, in the calibration block layout:
//   k, v [layer][kv_head][row][head_dim], res [boundary 0..L][row][n_embd].
struct ModelRows {
  std::vector<float> k, v, res;
};
// Runs `engine` over `tokens` in a fresh cache and captures its rows.
ModelRows capture_rows(model::Engine& engine, const std::vector<int32_t>& tokens);

// Builds a calibration set over the prompts the split names (calibration prompts first, in
// split order, then evaluation prompts); prompts not in the split are not run. Error if a
// prompt of the split is missing from `prompts`.
CalibrationSet collect_calibration(model::Engine& source, const std::string& source_identity,
                                   model::Engine& target, const std::string& target_identity,
                                   const std::vector<std::vector<int32_t>>& prompts,
                                   const PromptSplit& split, const std::string& tokenizer_identity,
                                   int shared_layers);

}  // namespace ember::map
