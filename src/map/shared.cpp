#include "map/shared.h"

#include <map>

#include "gguf/identity.h"
#include "util/error.h"

namespace ember::map {
namespace {

// The hyper-parameters that make one layer compute the same function (the layer count and
// vocabulary may differ without changing what a shared lower layer computes).
std::string layer_semantics(const model::ModelConfig& c) {
  return std::string(model::arch_name(c.arch)) + " E" + std::to_string(c.n_embd) + " H" +
         std::to_string(c.n_heads) + " G" + std::to_string(c.n_kv_heads) + " D" +
         std::to_string(c.head_dim) + " F" + std::to_string(c.n_ff) + " rope " +
         model::rope_layout_name(c.rope_layout) + " " + std::to_string(c.rope_theta) + " " +
         c.rope_scaling.type + " " + std::to_string(c.rope_scaling.factor) + " eps " +
         std::to_string(c.rms_eps) + (c.qkv_bias ? " qkv-bias" : "") + (c.qk_norm ? " qk-norm" : "") + " " +
         model::ffn_activation_name(c.ffn_activation) + " " + model::norm_kind_name(c.norm);
}

// name -> tensor hash of the tensors whose name starts with prefix.
std::map<std::string, Digest> tensors_with_prefix(const gguf::GgufFile& f, const std::string& prefix) {
  std::map<std::string, Digest> out;
  for (const auto& t : f.tensors())
    if (t.name.compare(0, prefix.size(), prefix) == 0) out[t.name] = gguf::tensor_hash(t);
  return out;
}

}  // namespace

SharedLayers shared_layers(const gguf::GgufFile& a, const model::ModelConfig& ca,
                           const gguf::GgufFile& b, const model::ModelConfig& cb) {
  SharedLayers r;
  if (layer_semantics(ca) != layer_semantics(cb)) {
    r.first_diff = "hyper-parameters (" + layer_semantics(ca) + " vs " + layer_semantics(cb) + ")";
    return r;
  }
  for (const char* name : {"token_embd.weight", "rope_freqs.weight"}) {
    const auto* ta = a.find_tensor(name);
    const auto* tb = b.find_tensor(name);
    if (!ta && !tb) continue;
    if (!ta || !tb || gguf::tensor_hash(*ta) != gguf::tensor_hash(*tb)) {
      r.first_diff = name;
      return r;
    }
  }
  const int L = std::min(ca.n_layers, cb.n_layers);
  for (int l = 0; l < L; ++l) {
    const std::string prefix = "blk." + std::to_string(l) + ".";
    const auto ta = tensors_with_prefix(a, prefix), tb = tensors_with_prefix(b, prefix);
    if (ta != tb) {
      for (const auto& [name, h] : ta) {
        auto it = tb.find(name);
        if (it == tb.end() || it->second != h) {
          r.first_diff = name;
          break;
        }
      }
      if (r.first_diff.empty()) r.first_diff = prefix + "* (tensor set)";
      return r;
    }
    r.layers = l + 1;
  }
  return r;
}

void require_shared(const SharedLayers& found, int s, const std::string& where) {
  if (s > found.layers)
    fail_field(where, "shared layers", "embeddings and layers [0, " + std::to_string(s) +
                                           ") byte-identical (by tensor hashes)",
               std::to_string(found.layers) + " shared; first difference: " + found.first_diff);
}

}  // namespace ember::map
