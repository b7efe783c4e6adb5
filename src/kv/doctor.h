#pragma once
// `ember kv doctor FILE --model M.gguf`: what is wrong with a foreign cache, or how far a
// compatible one is from a cold run (docs/formats/llamacpp-state.md, "kv doctor").
//
// Design goals: one verdict a user can act on, with the rows that decided it; when compatible,
// each head's error attributed to what explains it, and whether continuing from the cache
// picks the cold run's tokens. Non-goals: repairing a file; caches ember cannot read.
//
// Verdicts (exit codes: compatible 0, any other verdict 1, unreadable input 2):
//   compatible         every statistic within its bound and no row past the row bound
//   wrong-model        another model, fine-tune or weight quantization computed the rows
//                      (layer 0 off on most rows, or every layer off on most rows), or the
//                      file's geometry is not the model's
//   corrupt            a few rows off (named), or a layer holding another layer's rows
//   truncated          the file ends before its last field
//   v-layout-mismatch  K agrees and V does not (V stored transposed/in rows against its flag,
//                      or written with flash attention on/off against its layout), or the V
//                      section's header does not match its layout
//   past-context       more positions than the model's context length
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kv/foreign_check.h"
#include "kv/state.h"
#include "model/engine.h"

namespace ember::kv {

enum class DoctorVerdict { compatible, wrong_model, corrupt, truncated, v_layout_mismatch, past_context };
const char* doctor_verdict_name(DoctorVerdict v);

struct DoctorOptions {
  int positions = 0;       // positions checked: 0 = every position, else k sampled (last always)
  int next_tokens = 8;     // greedy steps compared with a cold run
  int cold_limit = 4096;   // the cold run (a prefill of the prefix) is measured up to this many positions
  bool attn_rot = true;    // undo llama.cpp's rotation of quantized rows
};

// One (layer, head, part) of a compatible cache, pooled over the checked positions: the
// error against ember's rows stored as the file's type, and what that model takes away.
struct HeadAttribution {
  int layer = 0, head = 0;
  char part = 'k';
  double error = 0;            // against the full model of the store (type, rotation)
  double without_quant = 0;    // against ember's rows rounded to f16 only (quantized types)
  double without_rot = 0;      // against the type without llama.cpp's rotation (rotated types)
  // "bit-identical" | "quantization reproduced block for block" | "rounding floor" |
  // "reduction-order drift" | "unexplained"
  std::string explained_by;
};

// One greedy step after the prefix: continuing from the cache against a cold run.
struct NextToken {
  int32_t cached = 0;       // argmax continuing from the cache (ties: lowest id)
  int32_t cold = -1;        // argmax of the cold run (-1: not measured)
  double margin = 0;        // top-2 logit margin of the cached run
  double logit_diff = -1;   // max |cached - cold| logit (-1: not measured)
  bool same = false;        // cached == cold (measured only)
  bool at_risk = false;     // margin <= 2 * logit_diff: a near tie the drift could flip
};

// The ember serve sidecar beside a slot file (NAME.ember.json), as far as it was read.
struct DoctorSidecar {
  bool present = false;
  std::string model_identity, engine;
  bool hash_matches = false;   // its state_sha256 is the file's
  bool model_matches = false;  // its model_identity is the model's
};

struct DoctorReport {
  std::string file, model;
  DoctorVerdict verdict = DoctorVerdict::compatible;
  std::string reason;                 // one line: why this verdict
  bool parsed = false;                // the file parsed (else reason holds the reader's error)
  int positions = 0;
  std::string type_k, type_v, v_layout;  // as stored ("q4_0+hadamard-64"), "transposed" | "rows"
  ModelCheck check;                   // parsed only
  std::vector<RowError> bad_k, bad_v; // rows past model_check_bound_row, by position
  std::vector<HeadAttribution> heads; // compatible only
  std::vector<NextToken> next;        // compatible only
  bool cold_measured = false;
  DoctorSidecar sidecar;
  int exit_code() const { return verdict == DoctorVerdict::compatible ? 0 : 1; }
};

// Diagnoses a llama.cpp `ggsq` file (`bytes`, named `where`) against the engine's model.
// Errors other than truncation, geometry, context length and V layout (a file that is not a
// `ggsq` state at all, an unknown type) propagate as Error: unreadable input, exit 2.
DoctorReport diagnose_llamacpp(std::span<const uint8_t> bytes, const std::string& where,
                               model::Engine& engine, const DoctorOptions& options,
                               const DoctorSidecar& sidecar);

// The same for a foreign state ember already holds (kv import-llamacpp / import-safetensors:
// a directory or .kvc), its stored types read from the provenance; all its positions checked
// again, whatever the import sampled.
DoctorReport diagnose_foreign_state(const VerifiedState& s, model::Engine& engine, const DoctorOptions& options,
                                    const std::string& where);

// The report as text (one verdict line first) and as JSON (docs give the fields).
std::string doctor_text(const DoctorReport& r);
nlohmann::ordered_json doctor_json(const DoctorReport& r);

}  // namespace ember::kv
