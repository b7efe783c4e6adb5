#pragma once
// Deterministic random numbers for synthetic models: the same seed gives the same bytes on
// every machine and compiler. Only integer arithmetic and correctly rounded IEEE operations
// (+, -, *, sqrt) are used: no libm transcendental (glibc picks FMA/non-FMA variants of
// log/cos at run time, which may differ in the last bit), so Box-Muller is not used.
#include <cmath>
#include <cstdint>
#include <string_view>

namespace ember::gguf {

// SplitMix64 (Steele, Lea, Flood 2014): a 64-bit counter through a bijective mixer.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Approximately standard normal: the Irwin-Hall sum of the four 16-bit lanes of one draw,
  // centred and scaled to unit variance. Exact in double; tails end at +-3.46 (no outliers,
  // which suits weight initialisation).
  double normal() {
    const uint64_t r = next();
    const uint64_t s = (r & 0xffff) + ((r >> 16) & 0xffff) + ((r >> 32) & 0xffff) + (r >> 48);
    // Each lane is uniform on 0..65535: mean 32767.5, variance (65536^2 - 1) / 12.
    static const double kInvStd = 1.0 / std::sqrt(4.0 * (65536.0 * 65536.0 - 1.0) / 12.0);
    return (double(s) - 131070.0) * kInvStd;
  }

 private:
  uint64_t state_;
};

// Seeds independent streams from a base seed and a name (FNV-1a of the name, then mixed).
inline uint64_t derive_seed(uint64_t seed, std::string_view name, uint64_t index = 0) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : name) {
    h ^= uint8_t(c);
    h *= 0x100000001b3ull;
  }
  SplitMix64 m(seed ^ h);
  m.next();
  SplitMix64 m2(m.next() + index * 0x9e3779b97f4a7c15ull);
  return m2.next();
}

}  // namespace ember::gguf
