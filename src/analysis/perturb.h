#pragma once
// The causal control of `kv compare`: zero or scale one (layer, KV head) of K, V or both,
// across the whole prefix, or quantize whole layers as llama.cpp's quantized KV caches do
// (analysis/kv_quantize.h), in memory only (docs/compare.md, "perturbation receipts").
//
// `ember kv perturb` writes a typed receipt, never a cache. `kv compare --perturb RECEIPT`
// re-applies it to RIGHT, which must be the receipt's native source snapshot (checked by
// snapshot id, payload hashes, model identity and geometry). The result is a PerturbedState:
// a distinct type with no writer and no conversion to a snapshot, so a perturbed state can
// never be saved as ember.kv-snapshot.v1 nor pass for a mapped cache.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/compare_state.h"
#include "analysis/kv_quantize.h"
#include "gguf/types.h"

namespace ember::analysis {

enum class PerturbPart { k, v, kv };
const char* perturb_part_name(PerturbPart p);  // "k" | "v" | "kv"
PerturbPart parse_perturb_part(const std::string& s);

struct PerturbSpec {
  int layer = 0;
  int head = 0;
  PerturbPart part = PerturbPart::kv;
  // zero: every selected element becomes +0.0 (bits 0x0000).
  // scale: every finite selected element x becomes f16(f32(x) * scale), rounded to nearest
  // even; NaN and Inf elements are kept bit for bit. So scale 1.0 changes no bit.
  bool zero = false;
  uint32_t scale_bits = 0x3f800000u;  // the exact f32 scale
  // quantize (neither zero nor scale; layer/head unused): every cache row (one position of one
  // layer, all KV heads) of the selected layers is quantized to this type with llama.cpp's
  // CPU encoder, dequantized and rounded to f16 (analysis/kv_quantize.h).
  std::optional<gguf::TensorType> quantize;
  // quantize only: llama.cpp's Hadamard rotation of quantized K/V modelled (the default, as
  // llama.cpp v0.5.0 does it; a no-op unless head_dim is a multiple of 64) or not.
  KvRotation rotation = KvRotation::llamacpp;
  std::vector<int> layers;  // quantize only: ascending and distinct; empty in a spec = all
};

struct PerturbReceipt {
  // The native source snapshot.
  std::string source_snapshot_id;
  std::string source_keys_sha256;
  std::string source_values_sha256;
  std::string source_model_identity;
  int n_layers = 0, n_kv_heads = 0, head_dim = 0, n_pos = 0;
  PerturbSpec spec;
  // Selected elements: n_pos * head_dim per part (quantize: layers * n_pos * kv_heads * head_dim).
  uint64_t affected_k = 0, affected_v = 0;
  uint64_t changed_k = 0, changed_v = 0;    // selected elements whose bits change
};

// Checks the spec against the source (native kind, layer/head in range, finite scale) and
// counts what it affects. Error naming the flag otherwise.
PerturbReceipt make_receipt(const ComparedState& source, const PerturbSpec& spec);

// One line for reports: "zero layer 0 head 1 part kv", "scale 0.5 layer ...", or
// "quantize q4_0 (llama.cpp KV cache, rotation llamacpp) layers 0,1 all heads part k".
std::string describe_operation(const PerturbSpec& spec);

// Canonical receipt JSON: fixed key order, no time/host/path; same receipt, same bytes.
std::string receipt_json(const PerturbReceipt& r);
// Strict: the text must be exactly the canonical JSON of the receipt it describes
// (so no unknown, missing, duplicated or reordered keys). Error naming `where` and the field.
PerturbReceipt parse_receipt(const std::string& text, const std::string& where);
// Writes the receipt atomically; an existing file is kept unless force.
void write_receipt(const std::string& path, const PerturbReceipt& r, bool force);

class PerturbedState {
 public:
  const ComparedState& state() const { return state_; }
  const PerturbReceipt& receipt() const { return receipt_; }
  const std::string& receipt_sha256() const { return receipt_sha256_; }

  PerturbedState(PerturbedState&&) = default;
  PerturbedState& operator=(PerturbedState&&) = default;

 private:
  PerturbedState() = default;
  friend PerturbedState apply_perturbation(ComparedState source, const PerturbReceipt& r, bool allow_non_finite);
  ComparedState state_;
  PerturbReceipt receipt_;
  std::string receipt_sha256_;
};

// Applies the receipt to its source, consuming it. Error naming the field when `source` is
// not the receipt's source snapshot, or when the bits it changes differ from the receipt's
// count, or when the perturbed K/V hold a non-finite value (unless allow_non_finite, which is
// `kv compare --allow-non-finite`: the one opt-in, as for a cache read from disk). The state's
// identity becomes kind "perturbed" with the receipt in its provenance.
PerturbedState apply_perturbation(ComparedState source, const PerturbReceipt& r, bool allow_non_finite = false);

}  // namespace ember::analysis
