#include "serve/prefix_cache.h"

#include <algorithm>

namespace ember::serve {

namespace {

// h_k from h_{k-1} and block k's ids (a splitmix64 step per id): a lookup key only, verified
// by comparing tokens before anything is restored.
uint64_t chain(uint64_t h, std::span<const int32_t> block) {
  for (int32_t id : block) {
    uint64_t z = h + 0x9e3779b97f4a7c15ULL + uint64_t(uint32_t(id));
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    h = z ^ (z >> 31);
  }
  return h;
}

constexpr uint64_t kChainStart = 0x656d6265722d7063ULL;  // "ember-pc"

}  // namespace

int PrefixCache::restore(std::span<const int32_t> tokens, int limit, model::KvCache& into) {
  const int blocks = std::min<int>(limit, int(tokens.size())) / kBlock;
  uint64_t h = kChainStart;
  Entries::iterator best = entries_.end();
  int best_n = 0;
  for (int k = 1; k <= blocks; ++k) {
    h = chain(h, tokens.subspan(size_t(k - 1) * kBlock, kBlock));
    const auto it = index_.find(h);
    if (it == index_.end()) break;  // no stored prompt shares k blocks, so none shares more
    const Entry& e = *it->second;
    const size_t n = size_t(k) * kBlock;
    if (e.tokens.size() < n || !std::equal(tokens.begin(), tokens.begin() + long(n), e.tokens.begin())) break;
    best = it->second;
    best_n = int(n);
  }
  if (best_n == 0) return 0;
  into.copy_prefix(best->cache, best_n);
  entries_.splice(entries_.begin(), entries_, best);  // most recently used
  return best_n;
}

void PrefixCache::insert(std::span<const int32_t> tokens, const model::KvCache& cache) {
  const int n = std::min<int>(int(tokens.size()), cache.n_pos) / kBlock * kBlock;
  if (n == 0) return;
  Entry e;
  e.tokens.assign(tokens.begin(), tokens.begin() + n);
  e.cache = model::KvCache(cache.n_layers, cache.n_kv_heads, cache.head_dim, n);
  e.bytes = (e.cache.k.size() + e.cache.v.size()) * sizeof(uint16_t) + e.tokens.size() * sizeof(int32_t);
  if (e.bytes > max_bytes_) return;
  uint64_t h = kChainStart;
  std::vector<uint64_t> keys;
  for (int k = 1; k <= n / kBlock; ++k) keys.push_back(h = chain(h, std::span(e.tokens).subspan(size_t(k - 1) * kBlock, kBlock)));
  // Already held whole by an entry: only refresh it.
  const auto held = index_.find(keys.back());
  if (held != index_.end() && held->second->tokens.size() >= size_t(n) &&
      std::equal(e.tokens.begin(), e.tokens.end(), held->second->tokens.begin())) {
    entries_.splice(entries_.begin(), entries_, held->second);
    return;
  }
  e.cache.copy_prefix(cache, n);
  e.cache.n_pos = n;
  while (bytes_ + e.bytes > max_bytes_ && !entries_.empty()) evict_last();
  bytes_ += e.bytes;
  entries_.push_front(std::move(e));
  for (uint64_t key : keys) index_[key] = entries_.begin();
}

void PrefixCache::evict_last() {
  const auto last = std::prev(entries_.end());
  uint64_t h = kChainStart;
  for (size_t k = 1; k * kBlock <= last->tokens.size(); ++k) {
    h = chain(h, std::span(last->tokens).subspan((k - 1) * kBlock, kBlock));
    const auto it = index_.find(h);
    if (it != index_.end() && it->second == last) index_.erase(it);
  }
  bytes_ -= last->bytes;
  entries_.erase(last);
}

}  // namespace ember::serve
