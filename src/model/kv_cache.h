#pragma once
// The KV cache: plain data, laid out so a snapshot export is a straight copy.
//
//   k[layer][kv_head][position][head_dim]   f16 bit patterns, keys post-RoPE
//   v[layer][kv_head][position][head_dim]   f16 bit patterns
//
// `capacity` positions are reserved per (layer, kv_head); positions [0, n_pos) are valid and
// n_pos is the cursor (the next position to be written). Copying is explicit (copy()) to make
// the cost visible; many caches can share one Model.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ember::model {

struct KvCache {
  int n_layers = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int capacity = 0;
  int n_pos = 0;
  std::vector<uint16_t> k;  // [n_layers][n_kv_heads][capacity][head_dim]
  std::vector<uint16_t> v;  // same shape

  KvCache() = default;
  KvCache(int layers, int kv_heads, int dim, int cap)
      : n_layers(layers), n_kv_heads(kv_heads), head_dim(dim), capacity(cap),
        k(size_t(layers) * kv_heads * cap * dim), v(k.size()) {}
  KvCache(KvCache&&) = default;
  KvCache& operator=(KvCache&&) = default;
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;
  KvCache copy() const {
    KvCache c;
    c.n_layers = n_layers; c.n_kv_heads = n_kv_heads; c.head_dim = head_dim;
    c.capacity = capacity; c.n_pos = n_pos; c.k = k; c.v = v;
    return c;
  }

  size_t index(int layer, int head, int pos) const {
    return ((size_t(layer) * n_kv_heads + head) * capacity + pos) * head_dim;
  }
  uint16_t* k_row(int layer, int head, int pos) { return k.data() + index(layer, head, pos); }
  uint16_t* v_row(int layer, int head, int pos) { return v.data() + index(layer, head, pos); }
  const uint16_t* k_row(int layer, int head, int pos) const { return k.data() + index(layer, head, pos); }
  const uint16_t* v_row(int layer, int head, int pos) const { return v.data() + index(layer, head, pos); }
};

}  // namespace ember::model
