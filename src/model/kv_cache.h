#pragma once
// The KV cache: plain data, laid out so a snapshot export is a straight copy.
//
//   k[layer][kv_head][position][head_dim]   f16 bit patterns, keys post-RoPE
//   v[layer][kv_head][position][head_dim]   f16 bit patterns
//
// `capacity` positions are reserved per (layer, kv_head); positions [0, n_pos) are valid and
// n_pos is the cursor (the next position to be written). Copying is explicit (copy()) to make
// the cost visible; many caches can share one Model. The cache grows as it fills: the engine
// calls reserve() when a forward pass needs more room (capacity sits in the middle of the
// index, so growing re-lays out every row), and callers allocate for what they hold, not for
// the most they might generate. Sizes are computed in 64 bits and checked (elements()).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
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
        k(elements(layers, kv_heads, cap, dim)), v(k.size()) {}

  // layers * kv_heads * positions * head_dim: each factor >= 0 and the product at most
  // 2^40 elements (2 TiB per payload), checked always; past that an allocation size would
  // be meaningless, not merely large.
  static size_t elements(int64_t layers, int64_t kv_heads, int64_t positions, int64_t dim) {
    EMBER_CHECK(layers >= 0 && kv_heads >= 0 && positions >= 0 && dim >= 0);
    constexpr uint64_t kMax = uint64_t(1) << 40;
    uint64_t n = 1;
    for (int64_t f : {layers, kv_heads, positions, dim}) {
      if (f != 0 && n > kMax / uint64_t(f))
        fail_field("kv cache", "size", "at most 2^40 elements per payload",
                   std::to_string(layers) + " layers x " + std::to_string(kv_heads) + " KV heads x " +
                       std::to_string(positions) + " positions x " + std::to_string(dim));
      n *= uint64_t(f);
    }
    return size_t(n);
  }
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

  // A new cache of rows [0, n) (n <= n_pos) with room for `extra` more positions, its cursor
  // at n: the scratch a check or a diagnostic decodes into without touching the cache it was
  // given, or a prefix stored on its own.
  KvCache copy_rows(int n, int extra = 0) const {
    EMBER_CHECK(n >= 0 && n <= n_pos && extra >= 0 && int64_t(n) + extra <= int64_t(1) << 30);
    KvCache w(n_layers, n_kv_heads, head_dim, n + extra);
    w.copy_prefix(*this, n);
    w.n_pos = n;
    return w;
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

  // Grows the capacity to at least `positions` (never shrinks). Every row of the old capacity
  // keeps its bits and its (layer, head, position); the rest is zero. The cost is a copy of
  // the whole cache, which is why the engine grows geometrically.
  void reserve(int positions) {
    EMBER_CHECK(positions >= 0);
    if (positions <= capacity) return;
    KvCache g(n_layers, n_kv_heads, head_dim, positions);
    g.n_pos = n_pos;
    const size_t row = size_t(capacity) * size_t(head_dim);
    if (row > 0)
      for (int l = 0; l < n_layers; ++l)
        for (int h = 0; h < n_kv_heads; ++h) {
          std::copy_n(k.data() + index(l, h, 0), row, g.k.data() + g.index(l, h, 0));
          std::copy_n(v.data() + index(l, h, 0), row, g.v.data() + g.index(l, h, 0));
        }
    *this = std::move(g);
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
