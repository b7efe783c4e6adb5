#pragma once
// Internal to ops/, for the SIMD kernel files: the software prefetch of the decode tiles.
//
// Decode (one token) reads every weight row once, straight from memory, and is bound by how
// well those reads overlap. The decode tiles (T = 1) of the AVX2 and AVX-512 kernels prefetch
// each row kDecodePrefetchBytes ahead of where they read it (prefetcht0). The hardware
// prefetchers alone left decode at 0.64 of the read bandwidth on a 2-vCPU Intel Xeon with
// AVX-512 (2026-12-02): Qwen2.5-0.5B Q8_0 at 39 tok/s, 52 with 2048 bytes ahead (1024: 50.5,
// 4096: 51, 6144: 50, so the distance is not critical), and the AVX2 K-quant decode, which
// had been latency bound, 2.7x faster (commit 04b6db0). The scalar reference does not prefetch.
//
// In an anonymous namespace, as kernels_avx2_driver.h: each SIMD file has its own copy.
#include <xmmintrin.h>

#include <cstdint>

namespace ember::ops::detail {
namespace {

constexpr int64_t kDecodePrefetchBytes = 2048;

// Whether a tile prefetches: a decode tile, or any tile of a streamed small batch
// (kStreamTokens, kernels.h).
template <int T>
inline bool streamed(int64_t tokens) {
  return T == 1 || tokens <= kStreamTokens;
}

// Prefetches the lines of the `span` bytes of each of the R rows that start
// kDecodePrefetchBytes past byte `at`: one prefetch per 64 bytes plus one, so a span that
// straddles lines is covered (the extra one is a line already in flight). A prefetch never
// faults, so past the end of a matrix it is dropped; the address is computed as an integer,
// because a pointer formed past the end of the mapping would be undefined behaviour.
template <int R, int64_t span>
inline void prefetch_ahead(const uint8_t* const* rows, int64_t at) {
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 8
    for (int64_t o = 0; o <= span; o += 64)
      _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(rows[r]) +
                                                 uintptr_t(at + kDecodePrefetchBytes + o)),
                   _MM_HINT_T0);
}

}  // namespace
}  // namespace ember::ops::detail
