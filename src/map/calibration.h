#pragma once
// Calibration data for cache translation (format ember.map-calibration.v1, docs/mapping.md).
//
// Both models are run on the same token sequences; for every prompt (a "block" of rows, one
// row per token position) we keep, as f32:
//   src_k, src_v  [layer][kv_head][row][head_dim]   source K (pre-RoPE, after Q/K norm) and V
//   tgt_k, tgt_v  [layer][kv_head][row][head_dim]   the same for the target
//   src_res       [boundary 0..L][row][n_embd]      the source residual entering each layer
//   tgt_res       [boundary 0..L][row][n_embd]      (boundary L: leaving the last layer)
// Every block names its prompt hash and its side of the frozen split; a fit reads only blocks
// the split calls calibration, and refuses any other (see PromptSplit::check_fit_prompt).
#include <cstdint>
#include <string>
#include <vector>

#include "map/split.h"
#include "util/json_fields.h"

namespace ember::map {

inline constexpr const char* kCalibrationFormat = "ember.map-calibration.v1";
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

struct CalibBlock {
  std::string prompt_hash;
  SplitPart part = SplitPart::calib;
  int n_rows = 0;
  std::vector<float> src_k, src_v, tgt_k, tgt_v, src_res, tgt_res;
};

struct CalibrationSet {
  ModelGeometry source, target;
  std::string tokenizer_identity;
  int shared_layers = 0;  // s: layers [0, s) and the embeddings are byte-identical
  PromptSplit split;
  std::vector<CalibBlock> blocks;

  // Sizes a block for n rows (all arrays zeroed).
  CalibBlock new_block(const std::string& hash, SplitPart part, int n_rows) const;
  // Row pointers into a block: head_dim (or n_embd) floats per row, n_rows rows.
  const float* src_k(const CalibBlock& b, int layer, int head) const;
  const float* src_v(const CalibBlock& b, int layer, int head) const;
  const float* tgt_k(const CalibBlock& b, int layer, int head) const;
  const float* tgt_v(const CalibBlock& b, int layer, int head) const;
  const float* src_res(const CalibBlock& b, int boundary) const;
  const float* tgt_res(const CalibBlock& b, int boundary) const;
  float* mut_src_k(CalibBlock& b, int layer, int head) const { return const_cast<float*>(src_k(b, layer, head)); }
  float* mut_src_v(CalibBlock& b, int layer, int head) const { return const_cast<float*>(src_v(b, layer, head)); }
  float* mut_tgt_k(CalibBlock& b, int layer, int head) const { return const_cast<float*>(tgt_k(b, layer, head)); }
  float* mut_tgt_v(CalibBlock& b, int layer, int head) const { return const_cast<float*>(tgt_v(b, layer, head)); }
  float* mut_src_res(CalibBlock& b, int boundary) const { return const_cast<float*>(src_res(b, boundary)); }
  float* mut_tgt_res(CalibBlock& b, int boundary) const { return const_cast<float*>(tgt_res(b, boundary)); }

  // Consistency: geometry > 0 and matching layer/head counts, array sizes, every block's
  // part agrees with the split (a block whose prompt the split calls evaluation can never be
  // labelled calibration), no prompt twice. Error naming `where` and the field.
  void validate(const std::string& where) const;

  // Directory with manifest.json and rows.f32le; atomic, refuses to overwrite without force.
  void write(const std::string& dir, bool force) const;
  // Strict read: format, payload size and SHA-256, validate().
  static CalibrationSet read(const std::string& dir);
  // The same read over bytes already in memory (the fuzz target's entry point).
  static CalibrationSet parse(const std::string& manifest_text, const uint8_t* payload, size_t payload_size,
                              const std::string& mpath, const std::string& ppath);
};

}  // namespace ember::map
