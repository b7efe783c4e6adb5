#pragma once
// KV caches that other runtimes write as safetensors, in and out of ember's cache
// (docs/formats/safetensors-cache.md). Two layouts, both post-RoPE keys in Hugging Face's
// rotate-half order (they run Hugging Face weights), so a llama cache is permuted per key
// head on the way in and out (docs/formats/kvc1.md, "RoPE and the Hugging Face layout"):
//
//   mlx    one file, as mlx-lm's save_prompt_cache writes a list of KVCache: tensor "{i}.0"
//          = layer i keys, "{i}.1" = its values, each [1, kv_heads, P, head_dim]; metadata
//          "{0}.{i}" = meta_state (""), "1.<key>" = user metadata, "2.{i}" = "KVCache" (any
//          other class, e.g. RotatingKVCache or QuantizedKVCache, is refused by name).
//   vllm   a directory, as vLLM's example KV connector (SharedStorageConnector /
//          ExampleConnector) writes for one request: one file per attention layer,
//          "model.layers.{i}.self_attn.attn.safetensors", holding one tensor "kv_cache"
//          [2, P, kv_heads * head_dim] (index 0 keys, 1 values; the flattened paged slots).
//
// Element types F16, BF16, F32; ember's cache is f16, so F32/BF16 are rounded to nearest
// even on import (F16 is bit-exact both ways). Neither layout records the model, tokenizer,
// prefix or positions' meaning: the importer must be told the model and the prefix, and
// checks what it can (geometry, element count, finiteness, and the model check of
// kv/foreign_check.h on recomputed rows).
#include <cstdint>
#include <map>
#include <span>
#include <string>

#include "kv/foreign_check.h"
#include "kv/state.h"
#include "model/engine.h"
#include "model/kv_cache.h"
#include "util/safetensors.h"

namespace ember::kv {

enum class SafetensorsLayout { mlx, vllm };
SafetensorsLayout parse_safetensors_layout(const std::string& s);  // "mlx" | "vllm"

// What the file holds. `positions` comes from the file (the prefix must match it).
struct ForeignCache {
  model::KvCache cache;       // f16, ember's key order, capacity == n_pos == positions
  std::string source_dtype;   // "F16" | "BF16" | "F32"
  SafetensorsLayout layout = SafetensorsLayout::mlx;
  std::string source_sha256;  // of the file (vllm: of its per-layer files, in layer order)
  uint64_t source_bytes = 0;
};

// Reads `path` (a file for mlx, a directory for vllm) against the model's geometry
// (g.positions is ignored: the file says) and RoPE layout ("normal" permutes keys). Error
// naming the file and the tensor or field: a missing, extra or misnamed tensor, a shape that
// is not the model's, a dtype other than F16/BF16/F32, mixed dtypes, non-finite values.
ForeignCache read_safetensors_cache(const std::string& path, SafetensorsLayout layout, const Geometry& g,
                                    const std::string& rope_layout);

// Writes positions [0, n_pos) of `c` in `layout` as `dtype` (F16 bit-exact, F32 exact,
// BF16 rounded), keys in Hugging Face order, atomically (a directory for vllm). `metadata`
// goes to __metadata__ (mlx: as "1.<key>", beside the per-layer entries; vllm: in each file).
void write_safetensors_cache(const model::KvCache& c, const std::string& rope_layout, SafetensorsLayout layout,
                             safetensors::Dtype dtype, const std::map<std::string, std::string>& metadata,
                             const std::string& path, bool force);

}  // namespace ember::kv

namespace ember::kv {

struct ForeignImportOptions {
  // The model check (kv/foreign_check.h): positions recomputed, the last always among them;
  // model_check == false compares nothing and says so in manifest.producer.
  int check_positions = kModelCheckPositions;
  bool model_check = true;
  std::string producer;          // manifest.producer (the check's summary is appended)
  // What computed the K/V (foreign.engine): "" names the layout's runtime ("mlx", "vllm");
  // a cache torch wrote in one of these layouts says "torch".
  std::string engine;
};

struct ForeignImport {
  VerifiedState snapshot;        // sealed foreign state (ember.kv-foreign), ready for write_state_dir
  // The model check: sampled positions recomputed by `engine` over the imported rows before
  // them, compared with the imported rows stored as the file's dtype. A wrong model, weight
  // quantization, prefix, RoPE layout or position is refused (refuse_model_check).
  ModelCheck check;              // check.logits: the boundary logits (last prefix token)
};

// A foreign state (ember.kv-foreign) for `engine`'s model from another runtime's cache: the
// prefix must have exactly the file's positions; the manifest is the engine's target
// description (describe_target) with numerics.contract "foreign", so like every foreign cache
// it is refused by `kv replay` without --allow-foreign and labelled cross-engine by `kv compare`. The imported rows are kept as they were
// (the recomputed rows are only the check). The resume token is the greedy argmax of the
// boundary logits of that evaluation (ties: lowest id), as `kv export` selects it.
ForeignImport import_foreign(model::Engine& engine, const std::string& tokenizer_identity,
                             std::span<const int32_t> prefix, ForeignCache foreign,
                             const ForeignImportOptions& options, const std::string& where);

}  // namespace ember::kv
