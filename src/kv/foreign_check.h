#pragma once
// The model check of a foreign cache: does the named model, over the imported prefix, compute
// the rows the file holds? Every foreign import runs it (llama.cpp state files, mlx/vLLM/torch
// safetensors caches) and `ember kv doctor` reports it in full (docs/formats/llamacpp-state.md,
// "The model check").
//
// Design: recompute_positions() evaluates k sampled positions (always the last) over the
// imported rows before them; each recomputed f32 row (keys after RoPE, as every importer stores
// them) goes through a model of the file's store path (f32/f16/bf16 rounding; llama.cpp's
// rotation and ggml's quantizer for q8_0..iq4_nl, reproduced exactly), and is compared with
// the imported row. What is left is the two engines' rounding (reduction order, fused vs
// separate ops), plus, for quantized types, the rare element whose code flips because that
// drift moved it across a rounding boundary. A wrong model, a wrong weight quantization, a
// wrong prefix or a corrupt row leaves far more. Non-goal: proving every row (doctor checks all
// positions; an import samples k).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kv/llamacpp_state.h"
#include "model/engine.h"

namespace ember::kv {

// How a foreign cache stored one part (K or V): what the check models.
struct StoredRowType {
  int32_t type = kGgmlF16;  // ggml type number (kGgml*): f32 | f16 | bf16 | a quantized type
  int rot = 0;              // llama.cpp's Hadamard block applied before quantizing (0: none)
};

// "q4_0" or "q4_0+hadamard-64".
std::string stored_row_type_name(const StoredRowType& t);

// One cell row of a layer (x: [n] f32, every KV head of one position, the layout llama.cpp
// quantizes) as the importer hands it to ember: stored in `t` (rounded, or rotated, quantized,
// dequantized and unrotated) then rounded to ember's f16 cache; out[n] the f16 values as f32.
void model_stored_row(const StoredRowType& t, const float* x, float* out, int64_t n);

// The error of one checked row of one head: the relative RMS error
// rms(imported - modelled) / rms(modelled) over its head_dim elements (modelled all zero:
// the plain RMS of the difference). Orthonormal rotations keep RMS, so a code that flipped in
// the rotated basis weighs the same as one that did not rotate.
struct RowError {
  int layer = 0, head = 0, position = 0;
  double error = 0;
};

// One statistic of a part: the relative RMS error pooled over a set of checked rows,
// sqrt(sum |imported - modelled|^2 / sum |modelled|^2), its bound and its worst row. Pooled
// because for quantized types a single element whose code flipped (drift across a rounding
// boundary) weighs much in one row of 32 but little over all of them, while a wrong model
// moves every row.
struct PooledError {
  double error = 0;
  double bound = 0;
  RowError worst;  // the row with the largest error in the set
  int rows = 0;    // rows pooled
  bool ok() const { return error <= bound; }  // NaN is not ok
};

// The check of one part over every sampled row, as two statistics:
//   layer0  layer 0 alone. Its K/V are the token's embedding through one norm, two matmuls
//           and RoPE: no attention before them, so nothing of the other engine's attention
//           (flash attention's f16 accumulation, llama.cpp's quantized activations feeding
//           later layers) reaches them. The bound is the rounding floor: a wrong weight
//           quantization, token or position shows here.
//   all     every layer. Later layers read the imported rows through attention, so the two
//           engines' drift grows with depth (and, for quantized types, flips codes); the
//           bound is the measured drift with a margin: another model or fine-tune shows here.
struct PartCheck {
  StoredRowType stored;
  PooledError layer0, all;
  std::vector<RowError> rows;  // every checked row, by position, layer, head
  uint64_t elements = 0, differing = 0;  // elements compared, elements not bit-equal
  bool ok() const { return layer0.ok() && all.ok(); }
};

struct ModelCheck {
  std::vector<int> positions;   // the sampled positions (ascending; the last prefix position last)
  PartCheck k, v;
  std::vector<float> logits;    // [n_vocab]: the recomputed next-token logits of the last position
  bool skipped = false;         // --no-model-check: nothing was compared (provenance says so)
  // With keep_rows: the recomputed f32 rows, [positions][n_layers][n_kv_heads * head_dim]
  // (keys after RoPE), for a caller that models them other ways (kv doctor).
  std::vector<float> k_f32, v_f32;
  bool ok() const { return skipped || (k.ok() && v.ok()); }
};

// The default number of sampled positions (the last always among them) and the seed of the
// draw: a fixed seed, so an import is reproducible.
inline constexpr int kModelCheckPositions = 4;
inline constexpr uint64_t kModelCheckSeed = 0x656d626572ull;  // "ember"

// The bounds for a stored type (docs/formats/llamacpp-state.md gives the measurements they rest
// on): layer 0 at the cross-engine rounding floor (quantized types included: their
// quantization is reproduced, not tolerated), every layer at the measured drift.
double model_check_bound_layer0(const StoredRowType& t);
double model_check_bound_all(const StoredRowType& t);
// The most one row (one layer, head, position) may differ before kv doctor names it: above
// every right pairing's worst row, so a row past it is corrupt or another model's.
double model_check_bound_row(const StoredRowType& t);

// Recomputes `positions` of `cache` (the imported rows, ember's f16 layout, keys after RoPE in
// ember's order) with `engine` over the cache's own prefix and compares every layer and KV
// head with the modelled store of `k` and `v`. tokens: the prefix (at least cache.n_pos ids).
ModelCheck check_foreign_rows(model::Engine& engine, const model::KvCache& cache,
                              std::span<const int32_t> tokens, const StoredRowType& k,
                              const StoredRowType& v, std::span<const int> positions,
                              bool keep_rows = false);

// What manifest.producer records of the check (short: the field holds 128 characters):
// "model check passed (4 positions)" or "model check skipped".
std::string model_check_summary(const ModelCheck& c);
// The figures, one line, for the importers' output: each statistic and its bound.
std::string model_check_figures(const ModelCheck& c);

// The first statistic over its bound (keys then values, layer 0 before every layer), naming
// its part and whether it is layer 0's; nullptr when the check passed or was skipped.
const PooledError* failed_statistic(const ModelCheck& c, const char** part, bool* layer0);

// The one line an import refuses with when !c.ok(): the failed statistic, its worst (layer,
// head, position), the measured and the allowed error, and what the excess means.
[[noreturn]] void refuse_model_check(const ModelCheck& c, const std::string& where);

}  // namespace ember::kv
