#pragma once
// llama.cpp caches as ember artifacts, both ways (docs/formats/llamacpp-state.md):
//   import: a `ggsq` v3 file checked against a GGUF model (kv/llamacpp_state.h), then an
//           ember.kv-foreign.v1 directory (kv/snapshot.h: ForeignProvenance), written by the
//           one directory writer and sealed like every other kind;
//   export: a native snapshot's f16 K/V as a `ggsq` v3 file llama.cpp restores for the same GGUF.
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "kv/foreign_check.h"
#include "kv/llamacpp_state.h"
#include "kv/state.h"
#include "model/engine.h"

namespace ember::kv {

inline constexpr const char* kForeignEngineLlamaCpp = "llama.cpp";

struct LlamaCppImportOptions {
  // The token at position P (the state file does not hold it). Unset: ember's argmax of the
  // logits of the last prompt token, evaluated over the imported cache of [0, P-1) (its K/V
  // at P-1 are discarded; the imported ones are kept).
  std::optional<int32_t> resume_token;
  // Undo llama.cpp's Hadamard rotation of quantized K/V (LlamaCppTarget::attn_rot).
  bool attn_rot = true;
  std::string producer = "ember 0.1.0";
  // The model check (kv/foreign_check.h): positions recomputed and compared, the last always
  // among them. model_check == false compares nothing and says so in manifest.producer.
  int check_positions = kModelCheckPositions;
  bool model_check = true;
};

// Parses `bytes` (the file named `where`) against the engine's model, runs the model check
// (refused naming layer, head, position, measured and allowed error: not this model's cache),
// and builds the sealed
// foreign state: the engine's target coordinates (describe_target) with the file's tokens,
// numerics {kForeignContract, "llama.cpp;ggsq-v3;weights=...;k=...;v=...;v_layout=..."},
// and the provenance (cache types, conversion, source SHA-256 and size; details: V layout and
// rotations). Write it with write_state_dir; read it back with open_state(DIR, {Accept::foreign}).
// `check`, when given, receives the model check's figures.
VerifiedState import_llamacpp(std::span<const uint8_t> bytes, model::Engine& engine,
                             const std::string& tokenizer_identity,
                             const LlamaCppImportOptions& options, const std::string& where,
                             ModelCheck* check = nullptr);

// The target a state file is parsed against: the engine's geometry and context.
LlamaCppTarget llamacpp_target(const model::Engine& engine, bool attn_rot);

// The model check of a parsed state (kv/foreign_check.h), k positions; with run == false only
// the last position is recomputed (for its logits) and the check says it was skipped.
ModelCheck check_llamacpp_state(model::Engine& engine, const LlamaCppState& st, int k, bool run);

// The `ggsq` bytes of a verified state's f16 cache (write_llamacpp_state) for its prefix tokens.
std::vector<uint8_t> export_llamacpp(const VerifiedState& s, bool v_trans);

}  // namespace ember::kv
