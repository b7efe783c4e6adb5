// The Q4_K / Q5_K super-block header's 6-bit scales and mins by vector operations, for the
// SIMD translation units (kernels_kquants_avx2.cpp and its VNNI builds, kernels_avx512.cpp
// and its VNNI build). Like ops/tile_driver.h it has no include guard and is included inside
// each ISA file's anonymous namespace, so that every file compiles its own copy with its own
// -m flags (tile_driver.h's opening note says why no inline code is shared across ISAs). It
// includes nothing itself; the including file has <immintrin.h> and gguf/blocks.h.
#if !defined(__AVX2__)
#error "ops/k4_scales.h is for the SIMD translation units only (see its opening note)"
#endif

// Scales sc0..sc7 then mins m0..m7 of a Q4_K / Q5_K block as 16 bytes, from hd, the block's
// first 16 bytes (d, dmin and the 12 scale bytes) in one load. As dwords u0 u1 u2 after d and
// dmin (bit layout: gguf/blocks.h unpack_k4_scale): sc0..3 = u0 & m6, sc4..7 = (u2 & m4) |
// ((u0 >> 2) & 0x30..), m0..3 = u1 & m6, m4..7 = ((u2 >> 4) & m4) | ((u1 >> 2) & 0x30..).
// The scalar unpacking and the stores between it and its vector were about half of the
// instructions of a Q4_K decode step (perf annotate, Llama-3.2-1B all-Q4_K tg, Zen 5).
inline __m128i k4_scales_mins(__m128i hd) {
  static_assert(offsetof(gguf::BlockQ4_K, scales) == 4 && offsetof(gguf::BlockQ5_K, scales) == 4);
  const __m128i low6 = _mm_and_si128(
      _mm_srlv_epi32(_mm_shuffle_epi32(hd, _MM_SHUFFLE(3, 2, 3, 1)), _mm_setr_epi32(0, 0, 0, 4)),
      _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
  const __m128i top2 = _mm_and_si128(_mm_srli_epi32(_mm_shuffle_epi32(hd, _MM_SHUFFLE(2, 2, 1, 1)), 2),
                                     _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
  return _mm_or_si128(low6, top2);
}

// The first 16 bytes of the Q4_K / Q5_K block at blk: k4_scales_mins' operand, and d, dmin
// as the low two f16 for vcvtph2ps.
inline __m128i k4_header(const uint8_t* blk) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk));
}
