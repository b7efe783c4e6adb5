#pragma once
// Open-addressing hash tables for the tokenizer's hot lookups (merge pairs, whole-word and
// piece lookups): one flat array, linear probing, no per-entry allocation. Built once at load,
// read-only afterwards (so const lookups are thread-safe). Capacity is a power of two at least
// twice the entry count, so probes stay short and every lookup terminates.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ember::tok {

inline uint64_t mix64(uint64_t x) {  // splitmix64 finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

inline uint64_t hash_bytes(std::string_view s) {  // FNV-1a 64, then mixed
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return mix64(h ^ s.size());
}

inline size_t table_capacity(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  return cap;
}

// uint64 key -> value V. Key ~0 is reserved as "empty".
template <typename V>
class PairMap {
 public:
  void reserve(size_t n) {
    keys_.assign(table_capacity(n), kEmpty);
    vals_.assign(keys_.size(), V{});
    mask_ = keys_.size() - 1;
  }
  // Inserts unless present; returns false if the key was already there. reserve() first.
  bool insert(uint64_t key, const V& v) {
    for (size_t i = mix64(key) & mask_;; i = (i + 1) & mask_) {
      if (keys_[i] == key) return false;
      if (keys_[i] == kEmpty) {
        keys_[i] = key;
        vals_[i] = v;
        return true;
      }
    }
  }
  const V* find(uint64_t key) const {
    if (keys_.empty()) return nullptr;
    for (size_t i = mix64(key) & mask_;; i = (i + 1) & mask_) {
      if (keys_[i] == key) return &vals_[i];
      if (keys_[i] == kEmpty) return nullptr;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t(0);
  std::vector<uint64_t> keys_;
  std::vector<V> vals_;
  size_t mask_ = 0;
};

// String -> id, where the strings live elsewhere (strings[id], stable for the map's life).
class StringIndex {
 public:
  void reserve(size_t n) {
    slots_.assign(table_capacity(n), Slot{0, -1});
    mask_ = slots_.size() - 1;
  }
  // Inserts id for strings[id] unless that string is present; returns false if it was.
  bool insert(const std::vector<std::string>& strings, int32_t id) {
    const std::string_view s = strings[static_cast<size_t>(id)];
    const uint64_t h = hash_bytes(s);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& slot = slots_[i];
      if (slot.id < 0) {
        slot = {static_cast<uint32_t>(h >> 32), id};
        return true;
      }
      if (slot.tag == static_cast<uint32_t>(h >> 32) && strings[static_cast<size_t>(slot.id)] == s) return false;
    }
  }
  int32_t find(const std::vector<std::string>& strings, std::string_view s) const {
    if (slots_.empty()) return -1;
    const uint64_t h = hash_bytes(s);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (slot.id < 0) return -1;
      if (slot.tag == static_cast<uint32_t>(h >> 32) && strings[static_cast<size_t>(slot.id)] == s) return slot.id;
    }
  }

 private:
  struct Slot {
    uint32_t tag;  // high half of the hash: most mismatches never touch the string
    int32_t id;    // -1: empty
  };
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

}  // namespace ember::tok
