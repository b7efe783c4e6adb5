#pragma once
// The KV cache: plain data, laid out so a snapshot export is a straight copy.
//
//   k[layer][kv_head][position][head_dim]   f16 bit patterns, keys post-RoPE
//   v[layer][kv_head][position][head_dim]   f16 bit patterns
//
// `capacity` positions are reserved per (layer, kv_head); positions [0, n_pos) are valid and
// n_pos is the cursor (the next position to be written). Copying is explicit (copy()) to make
// the cost visible; many caches can share one Model.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "util/error.h"

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

  // Copies positions [0, n) of the K and V rows of layers [layer_begin, layer_end) (all
  // layers by default) from `src`. Both caches must share layers, kv_heads and head_dim and
  // hold n positions: checked always, since a wrong copy would silently mix states. The cursor
  // is not moved; the caller says what n_pos means. The one place a cache prefix is copied.
  void copy_prefix(const KvCache& src, int n, int layer_begin = 0, int layer_end = -1) {
    if (layer_end < 0) layer_end = n_layers;
    EMBER_CHECK(layer_begin >= 0 && layer_begin <= layer_end && layer_end <= n_layers);
    if (layer_begin == layer_end || n == 0) return;
    EMBER_CHECK(src.n_layers == n_layers && src.n_kv_heads == n_kv_heads && src.head_dim == head_dim);
    EMBER_CHECK(n > 0 && n <= src.capacity && n <= capacity);
    const size_t row = size_t(n) * size_t(head_dim);
    for (int l = layer_begin; l < layer_end; ++l)
      for (int h = 0; h < n_kv_heads; ++h) {
        std::copy_n(src.k.data() + src.index(l, h, 0), row, k.data() + index(l, h, 0));
        std::copy_n(src.v.data() + src.index(l, h, 0), row, v.data() + index(l, h, 0));
      }
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
