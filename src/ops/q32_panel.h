// Q32Panel: the prefill of Q8_0, Q4_0 and Q5_0 in the AVX2 build of kernels_avx2.cpp (no VNNI;
// the VNNI builds take Q32Vnni, ops/q32_vnni_panel.h). Included inside that file's anonymous
// namespace, after codes32 and tree16, like ops/tile_driver.h (whose opening note says why);
// nothing else may include it.
//
// Why it looks like this. Without VNNI a 32-MAC step (one row, one token, one block) needs two
// vpmaddwd on int16 operands (vpmaddubsw needs the sign trick, one more multiply-port uop), a
// vpaddd, the conversion and the FMA: four uops on the two ports of an Intel core that multiply
// (p0, p1) and one that may take the third (p5), so 2.0 cycles is the floor. The previous panel
// (int16 codes, tokens split into even and odd bytes by three shifts per token and block, which
// also issue on p0 / p1, a vpermilps per step for the scale product, 12 accumulators that GCC
// spilled) ran 2.9 cycles per step on an Emerald Rapids core (0.886 ns, L1 data, k = 896). Here
//   - the tokens arrive in pair order (a.qp, made once per matmul): per block, bytes 0-15 hold
//     elements 4i and 4i + 1 (i = 0..7) and bytes 16-31 elements 4i + 2 and 4i + 3, so one
//     vpmovsxbw from memory (a load and a p5 uop) widens each half, and vpmaddwd of the first
//     half gives lane i = w[4i] a[4i] + w[4i+1] a[4i+1], of the second w[4i+2] a[4i+2] +
//     w[4i+3] a[4i+3]: their sum is dot4's lane i, the same integer;
//   - the panel holds the 4 rows' codes widened to int16 in the same order (64 bytes per row
//     and block), read by the vpmaddwd as memory operands;
//   - a tile of 4 rows x 2 tokens keeps its 8 accumulators, the two tokens' halves and the
//     temporaries in the 16 ymm registers, one asm statement per half pass (GCC spilled the
//     intrinsics), and takes each scale product wd * ad from a table made for the token pair
//     before the half pass's loop (one vmulps per block): rows 0-1's 4 products come in one
//     load (vbroadcastf128), in both 128-bit halves, and one vpermilps per step spreads its
//     product over the 8 lanes; rows 2-3's steps each take theirs by a vbroadcastss load.
// Per step: 2 vpmaddwd + vcvtdq2ps + FMA on p0 / p1; per 8 steps 4 vpmovsxbw and 4 vpermilps
// on p5 and 8 vpaddd on any of the three: 48 uops on 3 ports, so 2.0 cycles stays the floor on
// Intel (with a vpermilps in every step it would be 2.17). On a Zen 5 core (two 256-bit loads
// a cycle; vpmaddwd and the FMA on two pipes, vcvtdq2ps and the shuffle elsewhere: bench_ports)
// the loads bound the step: 3.5 a step with a broadcast in each, 3.1 here. bench_matmul 1 avx2
// 512 q8_0,q4_0,q5_0 there, GOP/s, alternating rounds: the products made in the loop and read
// back at once by the broadcasts (store forwarding) 86-91; made before the loop 99-105; a
// vpermilps in rows 0-1's steps 104-110, the same as in every step (105-108).
//
// The bits are Q32K's: the same int32 lane sums, converted by the same vcvtdq2ps, met by the
// same float product wd * ad in the same FMA, even blocks into one accumulator and odd blocks
// into another, each in block order, then tree16.
//
// Measured on the Emerald Rapids VM (1 thread, 3.0 GHz): the tile loop over L1 data, k = 896,
// 0.724 ns per step (2.17 cycles; 0.886 before), k = 4864 0.819.

// One step: row R, token T (halves in ymm TL, TH), accumulator ymm ACC, the scale product
// spread into ymm14 by SCALE (from ymm15 or from the table); ymm12, ymm13 temporaries.
#define EMBER_Q32_STEP(SCALE, R, T, TL, TH, ACC)                            \
  "vpmaddwd (" #R " * 64)(%[pan]), %%ymm" #TL ", %%ymm12\n\t"         \
  "vpmaddwd (" #R " * 64 + 32)(%[pan]), %%ymm" #TH ", %%ymm13\n\t"    \
  "vpaddd %%ymm13, %%ymm12, %%ymm12\n\t"                               \
  "vcvtdq2ps %%ymm12, %%ymm12\n\t"                                     \
  SCALE(R, T)                                                          \
  "vfmadd231ps %%ymm14, %%ymm12, %%ymm" #ACC "\n\t"
#define EMBER_Q32_PERM(R, T) "vpermilps $(0x55 * ((2 * " #R " + " #T ") & 3)), %%ymm15, %%ymm14\n\t"
#define EMBER_Q32_BCAST(R, T) "vbroadcastss (16 + 4 * ((2 * " #R " + " #T ") & 3))(%[prd]), %%ymm14\n\t"

template <TensorType TY>
struct Q32Panel : BlockPanel<32, 288> {
  static_assert(TY == TensorType::Q8_0 || TY == TensorType::Q4_0 || TY == TensorType::Q5_0);
  static constexpr int kT = 8;  // tokens per tile (a panel holds 4 rows), taken 2 at a time
  // Block b at panel + 288 b: row r's 32 codes as int16 in pair order at 64 r, then the rows'
  // scales wd as 8 floats, rows 0, 0, 1, 1, 2, 2, 3, 3 (to meet a token pair's two scales).

  // A block's 32 codes in pair order (see above): pairs (4i, 4i + 1) within each 128-bit half,
  // then (4i + 2, 4i + 3), then the middle quadwords swapped so the first 16 bytes hold all of
  // the first kind.
  static __m256i pair_order(__m256i w) {
    const __m256i within = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,
                                            0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
    return _mm256_permute4x64_epi64(_mm256_shuffle_epi8(w, within), 0xD8);
  }

  // Block by block, its 4 rows each, so the panel is written in order, each 288-byte block
  // whole: row by row, a panel larger than L1 (72 KiB at k = 8192) had each of its lines
  // fetched again for every row. bench_matmul 1 avx2 512 q8_0 on a Zen 5 core, medians of 4
  // alternated rounds, GOP/s: k = 8192 94.3 -> 96.8, k = 2048 (m = 8192) 103.6 -> 105.8. The
  // VNNI and K-quant panels measured within noise either way and fill row by row.
  void fill(const uint8_t* const* rows) {
    for (int64_t b = 0; b < nb; ++b) {
      #pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) {
        float d, m;
        const __m256i w = pair_order(codes32<TY>(rows[r], b, &d, &m));
        uint8_t* blk = panel + kBlock * b;
        __m256i* out = reinterpret_cast<__m256i*>(blk + 64 * r);
        _mm256_store_si256(out, _mm256_cvtepi8_epi16(_mm256_castsi256_si128(w)));
        _mm256_store_si256(out + 1, _mm256_cvtepi8_epi16(_mm256_extracti128_si256(w, 1)));
        float* wd = reinterpret_cast<float*>(blk + 256);
        wd[2 * r] = wd[2 * r + 1] = d;
      }
    }
  }

  // Rows [0, 4) of the panel x tokens [t0, t0 + T): y[(t0 + t) * m + i + r]. A last single
  // token runs as a pair of itself (its second copy is not written). The blocks go in chunks
  // of kChunk, every token pair through one chunk before the next, so that at large k the
  // panel's chunk (9 KiB) stays in L1 for all of them; each pair's accumulators wait in
  // memory between chunks (their values, so the bits do not change).
  static constexpr int64_t kChunk = 32;  // blocks, even (the even / odd split holds per chunk)

  template <int T>
  void tile(const Activations& a, int64_t t0, int64_t m, int64_t i, float* y) const {
    constexpr int P = (T + 1) / 2;
    alignas(32) float even[P][8][8], odd[P][8][8];
    for (int64_t c0 = 0; c0 < nb; c0 += kChunk) {
      const int64_t c1 = c0 + kChunk < nb ? c0 + kChunk : nb;
      #pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
        const int64_t t = t0 + 2 * p;
        const int8_t* act = a.qp + t * k + 32 * c0;
        const float* dp = a.dp + 2 * (t * nb + c0);
        const int64_t stride = 2 * p + 1 < T ? k : 0;
        const uint8_t* pan = panel + kBlock * c0;
        half_pass(pan, act, dp, (c1 - c0 + 1) / 2, stride, c0 == 0, even[p], k);
        half_pass(pan + kBlock, act + 32, dp + 2, (c1 - c0) / 2, stride, c0 == 0, odd[p], k);
      }
    }
    #pragma GCC unroll 4
    for (int p = 0; p < P; ++p)
      #pragma GCC unroll 4
      for (int r = 0; r < 4; ++r)
        for (int t = 0; t < (2 * p + 1 < T ? 2 : 1); ++t)
          y[(t0 + 2 * p + t) * m + i + r] =
              tree16(_mm256_load_ps(even[p][2 * r + t]), _mm256_load_ps(odd[p][2 * r + t]));
  }

  // count blocks 2 apart (pan, act, dp at the first) into acc[2 r + t] (8 lanes per row and
  // token), which starts at +0 for the first chunk (a store forwarded from the zeroing of acc
  // would stall each load) and at acc's values for later ones; the second token at act +
  // stride. The next pair's bytes (2k and 3k on, k the row length) are prefetched: the tokens
  // come from L2 (bench_matmul +2-3 %).
  static void half_pass(const uint8_t* pan, const int8_t* act, const float* dp, int64_t count,
                        int64_t stride, bool first, float (&acc)[8][8], int64_t k) {
    // The count blocks' scale products wd[r] * ad[t] (one vmulps of the panel's scales by the
    // pair's two, a.dp), made before the pass (a table written in the loop and read back at
    // once waits on store forwarding): block j's at table[j] as r0t0 r0t1 r1t0 r1t1 r2t0 r2t1
    // r3t0 r3t1, the vmulps as it comes. The loop's vbroadcastf128 puts rows 0-1's 4 in both
    // 128-bit halves (for vpermilps); with the table holding them twice, two vperm2f128 and
    // a second store per block were 14 % of the tile's samples beside the loop's 84 %
    // (perf, Llama-3.2-1B Q8_0 pp512). bench_matmul 1 avx2 512 q8_0, medians of 5 alternated
    // rounds, GOP/s: k = 896 104.3 -> 106.2, 2048 104.1 -> 105.7, 8192 98.2 -> 99.9.
    alignas(32) float table[(kChunk + 1) / 2][8];
    for (int64_t j = 0; j < count; ++j)
      _mm256_store_ps(table[j], _mm256_mul_ps(
          _mm256_castpd_ps(_mm256_broadcast_sd(reinterpret_cast<const double*>(dp + 4 * j))),
          _mm256_load_ps(reinterpret_cast<const float*>(pan + 2 * kBlock * j + 256))));
    const float* prd = &table[0][0];
    // ymm0-7: accumulators (row r, token t in ymm 2r + t); ymm8, ymm9: token 0's halves;
    // ymm10, ymm11: token 1's; ymm12-14: temporaries; ymm15: rows 0-1's scale products.
    __asm__ volatile(
        "test %[first], %[first]\n\t"
        "jz 3f\n\t"
        EMBER_ASM_ZERO_ACC
        "jmp 4f\n\t"
        "3:\n\t"
        EMBER_ASM_LOAD_ACC("acc")
        "4:\n\t"
        "test %[count], %[count]\n\t"
        "jle 2f\n\t"
        "1:\n\t"
        "prefetcht0 (%[act],%[k2],1)\n\t"
        "prefetcht0 (%[act],%[k3],1)\n\t"
        "vpmovsxbw (%[act]), %%ymm8\n\t"
        "vpmovsxbw 16(%[act]), %%ymm9\n\t"
        "vpmovsxbw (%[act],%[stride],1), %%ymm10\n\t"
        "vpmovsxbw 16(%[act],%[stride],1), %%ymm11\n\t"
        "vbroadcastf128 (%[prd]), %%ymm15\n\t"
        EMBER_Q32_STEP(EMBER_Q32_PERM, 0, 0, 8, 9, 0) EMBER_Q32_STEP(EMBER_Q32_PERM, 0, 1, 10, 11, 1)
        EMBER_Q32_STEP(EMBER_Q32_PERM, 1, 0, 8, 9, 2) EMBER_Q32_STEP(EMBER_Q32_PERM, 1, 1, 10, 11, 3)
        EMBER_Q32_STEP(EMBER_Q32_BCAST, 2, 0, 8, 9, 4) EMBER_Q32_STEP(EMBER_Q32_BCAST, 2, 1, 10, 11, 5)
        EMBER_Q32_STEP(EMBER_Q32_BCAST, 3, 0, 8, 9, 6) EMBER_Q32_STEP(EMBER_Q32_BCAST, 3, 1, 10, 11, 7)
        "add $576, %[pan]\n\t"
        "add $64, %[act]\n\t"
        "add $32, %[prd]\n\t"
        "dec %[count]\n\t"
        "jnz 1b\n\t"
        "2:\n\t"
        EMBER_ASM_STORE_ACC("acc")
        : [pan] "+r"(pan), [act] "+r"(act), [prd] "+r"(prd), [count] "+r"(count)
        : [stride] "r"(stride), [acc] "r"(&acc[0][0]),
          [first] "r"(int64_t(first)), [k2] "r"(2 * k), [k3] "r"(3 * k)
        : "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",
          "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
  }
};

#undef EMBER_Q32_STEP
#undef EMBER_Q32_PERM
#undef EMBER_Q32_BCAST
