#pragma once
// The RAM tier of the server's prefix cache: K/V rows of prompts already computed, kept in
// whole blocks of kBlock tokens, least recently used evicted first, bounded in bytes
// (--cache-ram). Under canonical-v1 (b) and (d) a row of K/V depends only on its token, its
// position and the rows before it, so rows restored from here and the rest computed give the
// cold run's logits bit for bit.
//
// A lookup walks the prompt's blocks with a chained 64-bit hash; a hash only finds a
// candidate, which is then compared token by token, so a collision costs a miss, never a
// wrong restore. Not thread-safe: the scheduler thread alone uses it.
#include <cstddef>
#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "model/kv_cache.h"

namespace ember::serve {

class PrefixCache {
 public:
  static constexpr int kBlock = 16;  // tokens per block, as the store's prefix chain

  explicit PrefixCache(size_t max_bytes) : max_bytes_(max_bytes) {}

  // Copies the longest stored prefix of tokens[0, limit) that is a whole number of blocks
  // into `into` (rows [0, n), cursor untouched) and returns n (0: miss). `into` must have the
  // geometry of the stored caches and room for n positions.
  int restore(std::span<const int32_t> tokens, int limit, model::KvCache& into);

  // Keeps rows [0, n) of `cache` for tokens[0, n), n the largest multiple of kBlock <= the
  // tokens given (nothing when below one block, or when the entry alone is over the budget).
  void insert(std::span<const int32_t> tokens, const model::KvCache& cache);

  size_t bytes() const { return bytes_; }
  size_t entries() const { return entries_.size(); }

 private:
  struct Entry {
    std::vector<int32_t> tokens;
    model::KvCache cache;  // exactly tokens.size() positions
    size_t bytes = 0;
  };
  using Entries = std::list<Entry>;  // most recently used first
  // Chained hash of the first k blocks -> the entry holding them (the newest such entry).
  std::unordered_map<uint64_t, Entries::iterator> index_;
  Entries entries_;
  size_t max_bytes_ = 0, bytes_ = 0;

  void evict_last();
};

}  // namespace ember::serve
