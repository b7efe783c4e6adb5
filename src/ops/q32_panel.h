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
//     and block);
//   - a tile of 4 rows x 2 tokens keeps its 8 accumulators, the two tokens' halves and the
//     temporaries in the 16 ymm registers, one asm statement per half pass (GCC spilled the
//     intrinsics), loads each row's two code halves once for both tokens, and takes each scale
//     product wd * ad by a vbroadcastss from a table made for the token pair before the half
//     pass's loop (one vmulps per block).
// Per step: 2 vpmaddwd + vcvtdq2ps + FMA on p0 / p1; per 8 steps 4 vpmovsxbw on p5 and 8 vpaddd
// on any of the three: 44 uops on 3 ports, so 2.0 cycles stays the floor on Intel. On a Zen 5
// core (two 256-bit loads a cycle; vpmaddwd and the FMA on two pipes, vcvtdq2ps and the
// shuffles elsewhere: bench_ports) the multiplies bound the step at 1.5 cycles (1.56 with the
// table's vmulps) and the loads come close: 2.5 a step here (8 code halves, 4 token halves, 8
// broadcasts per 8 steps), 3.1 when every step read its codes as memory operands and rows 0-1
// took their products by a vbroadcastf128 and a vpermilps, 3.5 with a broadcast in each step
// and the codes from memory. bench_matmul 1 avx2 512 q8_0,q4_0,q5_0 there, GOP/s, alternating
// rounds: the products made in the loop and read back at once by the broadcasts (store
// forwarding) 86-91; made before the loop 99-105; a vpermilps in rows 0-1's steps 104-110, the
// same as in every step (105-108); the codes loaded once per row (and the table's loop unrolled,
// below), medians of 4 rounds, q8_0 k = 2048 105.0 -> 109.5, 8192 (m = 2048) 98.9 -> 102.5,
// 2048 (m = 8192) 105.2 -> 111.7, 896 106.1 -> 108.1.
//
// The bits are Q32K's: the same int32 lane sums, converted by the same vcvtdq2ps, met by the
// same float product wd * ad in the same FMA, even blocks into one accumulator and odd blocks
// into another, each in block order, then tree16.
//
// Measured on the Emerald Rapids VM (1 thread, 3.0 GHz): the tile loop over L1 data, k = 896,
// 0.724 ns per step (2.17 cycles; 0.886 before), k = 4864 0.819.

// One row R of the tile, both tokens (halves in ymm8, ymm9 and ymm10, ymm11), into
// accumulators ymm A0 and A1: the row's two code halves loaded once into ymm12, ymm13 and met by
// each token's in turn; the second token's products overwrite the codes (their last use), and
// ymm15, then ymm13, take each step's scale product from the table by a broadcast.
#define EMBER_Q32_ROW(R, A0, A1)                                                   \
  "vmovdqa (" #R " * 64)(%[pan]), %%ymm12\n\t"                                   \
  "vmovdqa (" #R " * 64 + 32)(%[pan]), %%ymm13\n\t"                              \
  "vpmaddwd %%ymm12, %%ymm8, %%ymm14\n\t"                                        \
  "vpmaddwd %%ymm13, %%ymm9, %%ymm15\n\t"                                        \
  "vpaddd %%ymm15, %%ymm14, %%ymm14\n\t"                                         \
  "vcvtdq2ps %%ymm14, %%ymm14\n\t"                                               \
  "vbroadcastss (8 * " #R ")(%[prd]), %%ymm15\n\t"                               \
  "vfmadd231ps %%ymm15, %%ymm14, %%ymm" #A0 "\n\t"                               \
  "vpmaddwd %%ymm12, %%ymm10, %%ymm12\n\t"                                       \
  "vpmaddwd %%ymm13, %%ymm11, %%ymm13\n\t"                                       \
  "vpaddd %%ymm13, %%ymm12, %%ymm12\n\t"                                         \
  "vcvtdq2ps %%ymm12, %%ymm12\n\t"                                               \
  "vbroadcastss (8 * " #R " + 4)(%[prd]), %%ymm13\n\t"                           \
  "vfmadd231ps %%ymm13, %%ymm12, %%ymm" #A1 "\n\t"

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
    // once waits on store forwarding; written one block ahead in the loop, into two slots in
    // turn, it ran at most 1 % faster than this in a copy of the loop over L1 data, and 5-6 %
    // slower in place: the loop is bound by the multiply pipes, whose slot the vmulps takes,
    // while this loop runs beside the previous pass's last iterations): block j's at
    // table[j] as r0t0 r0t1 r1t0 r1t1 r2t0 r2t1 r3t0 r3t1, the vmulps as it comes. A full
    // chunk's 16 go unrolled: the table is the largest part of the tile outside its loops
    // (about 10 % of its samples, perf of Llama-3.2-1B Q8_0 pp512 on Zen 5), and its loop's
    // overhead 2 % of the pass in that copy.
    alignas(32) float table[(kChunk + 1) / 2][8];
    const auto product = [&](int64_t j) {
      _mm256_store_ps(table[j], _mm256_mul_ps(
          _mm256_castpd_ps(_mm256_broadcast_sd(reinterpret_cast<const double*>(dp + 4 * j))),
          _mm256_load_ps(reinterpret_cast<const float*>(pan + 2 * kBlock * j + 256))));
    };
    if (count == (kChunk + 1) / 2) {
      #pragma GCC unroll 16
      for (int64_t j = 0; j < (kChunk + 1) / 2; ++j) product(j);
    } else {
      for (int64_t j = 0; j < count; ++j) product(j);
    }
    const float* prd = &table[0][0];
    // ymm0-7: accumulators (row r, token t in ymm 2r + t); ymm8, ymm9: token 0's halves;
    // ymm10, ymm11: token 1's; ymm12, ymm13: a row's code halves; ymm14, ymm15: temporaries.
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
        EMBER_Q32_ROW(0, 0, 1) EMBER_Q32_ROW(1, 2, 3) EMBER_Q32_ROW(2, 4, 5) EMBER_Q32_ROW(3, 6, 7)
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

#undef EMBER_Q32_ROW
