// Q32Vnni: the prefill of Q8_0, Q4_0 and Q5_0 in the ymm VNNI builds of kernels_avx2.cpp
// (avxvnni, avxvnni-evex). Included inside that file's anonymous namespace, after codes32,
// dpbusd and tree16, like ops/tile_driver.h (whose opening note says why); nothing else may
// include it.
//
// Why it exists: on the Intel cores that take this path (Golden Cove and later: AVX-VNNI
// without AVX-512), vpdpbusd, vcvtdq2ps and the FMA all issue on the same two ports, and
// Q32K's tile added a shuffle per step and spilled its 24 accumulators: 1.97 cycles per
// 32-MAC step (one row, one token, one block) on an Emerald Rapids core, against the 1.5 the
// ports allow. Each step here is
//   vmovdqa   tmp, bias_r          (a register move, eliminated at rename)
//   vpdpbusd  tmp, u_t, w_r        (MAGIC + the block sum, exactly)
//   vsubps    tmp, tmp, MAGIC      (the block sum as a float, exactly: on the fast adder)
//   vbroadcastss s, prod[r][t]     (a load)
//   vfmadd231ps acc[r][t], s, tmp
// so two of its four vector uops use the multiply ports, and every operand of the 2 rows x
// 4 tokens tile sits in a register (8 accumulators, the 2 rows' codes and corrections, the
// token, the magic, two temporaries: all 16). Written as one asm statement per half pass:
// GCC 12 spilled the same intrinsics to the stack.
//
// The bits are Q32K's. vpdpbusd takes the token as unsigned bytes u = q + 128 (a.u, made
// once per matmul) and the accumulator starts at bias = MAGIC - 128 * (sum of the lane's 4
// codes), so it ends at MAGIC + sum q w with MAGIC = 0x4B400000, the bits of 1.5 * 2^23. The
// block sum s of a lane is at most 4 * 128 * 128 = 2^16 in size, so MAGIC + s, read as a
// float, is 1.5 * 2^23 + s exactly, and subtracting 1.5 * 2^23 leaves s exactly: the value
// vcvtdq2ps gives (+0 for 0 too). The scale product wd * ad is one vmulps per row and block
// for 8 tokens (a.dt holds a block's token scales side by side), the same float product.
// Even blocks go to one accumulator and odd ones to another, each in block order (Q32K's two
// half passes), then tree16.
//
// Measured on the Emerald Rapids VM (1 thread, a panel's tiles over L1-resident data, k =
// 896, ns per step at 3.0 GHz): Q32K's 4 x 6 tile 0.66-0.69; this with vcvtdq2ps in place of
// the subtraction 0.585, as written with 4-token tiles 0.525, with 8-token tables 0.467 (1.4
// cycles). bench_matmul 1 avxvnni 512 q8_0: 73-76 GOP/s before, 110-120 after.

#if EMBER_AVX2_VNNI == 1
#define EMBER_VNNI_ASM_PREFIX "%{vex%} "
#else
#define EMBER_VNNI_ASM_PREFIX "%{evex%} "
#endif

// One step: row R (bias in ymm BR, codes in ymm WR), token T, accumulator ymm ACC; the token
// is in ymm12, the magic in ymm15, ymm13 and ymm14 are the temporaries.
#define EMBER_VNNI_STEP(BR, WR, R, T, ACC)                                  \
  "vmovdqa %%ymm" #BR ", %%ymm13\n\t"                                       \
  EMBER_VNNI_ASM_PREFIX "vpdpbusd %%ymm" #WR ", %%ymm12, %%ymm13\n\t"      \
  "vsubps %%ymm15, %%ymm13, %%ymm13\n\t"                                    \
  "vbroadcastss (" #R " * 32 + " #T " * 4)(%[prd]), %%ymm14\n\t"           \
  "vfmadd231ps %%ymm14, %%ymm13, %%ymm" #ACC "\n\t"
#define EMBER_VNNI_TOKEN(T, ADDR, ACC0, ACC1)                               \
  "vmovdqu " ADDR ", %%ymm12\n\t"                                           \
  EMBER_VNNI_STEP(8, 10, 0, T, ACC0) EMBER_VNNI_STEP(9, 11, 1, T, ACC1)

template <TensorType TY>
struct Q32Vnni {
  static_assert(TY == TensorType::Q8_0 || TY == TensorType::Q4_0 || TY == TensorType::Q5_0);
  static constexpr int kT = 8;  // tokens per tile (a panel holds 4 rows, taken 2 at a time)
  static constexpr int32_t kMagic = 0x4B400000;

  int64_t k = 0, nb = 0;
  uint8_t* pairs = nullptr;  // row pair p, block b at pairs + 128 (nb p + b): the codes of
                             // rows 2p and 2p + 1 (32 bytes each), then their biases (8 x i32)
  float* scale = nullptr;    // scale[4 b + r]
  const uint8_t* rows[4] = {};  // for the token tails (Q32K's tiles)

  static int64_t bytes(int64_t k) { return 256 * (k / 32) + 16 * (k / 32); }

  void bind(uint8_t* mem, int64_t k_) {
    k = k_, nb = k_ / 32;
    pairs = mem;
    scale = reinterpret_cast<float*>(mem + 256 * nb);
  }

  void fill(const uint8_t* const* rows_) {
    const __m256i x80 = _mm256_set1_epi8(char(0x80)), magic = _mm256_set1_epi32(kMagic);
    #pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      rows[r] = rows_[r];
      uint8_t* base = pairs + 128 * nb * (r / 2) + 32 * (r % 2);
      for (int64_t b = 0; b < nb; ++b) {
        float d, m;
        const __m256i w = codes32<TY>(rows_[r], b, &d, &m);
        _mm256_store_si256(reinterpret_cast<__m256i*>(base + 128 * b), w);
        _mm256_store_si256(reinterpret_cast<__m256i*>(base + 128 * b + 64),
                           _mm256_sub_epi32(magic, dpbusd(_mm256_setzero_si256(), x80, w)));
        scale[4 * b + r] = d;
      }
    }
  }

  // The blocks go in chunks of kChunk, every row pair and 4-token group of the tile through
  // one chunk before the next (Q32Panel's order), so that at large k the chunk's codes and
  // biases of both pairs (16 KiB), its 8 tokens' bytes (16 KiB) and products (8 KiB) stay in
  // L1 for all of them; unchunked, a row longer than about 2048 left the tile reading panel
  // and tokens from L2 again for each pair. bench_matmul 1 avxvnni 512 q8_0 K,M on a Zen 5
  // core, GOP/s, old and new alternated: k = 8192 (Llama-3.2-1B's ffn_down) 97-105 -> 112-120,
  // k = 4864 114-120 -> 121-126, k = 896 (one chunk) 148-151 both. Chunks of 32 ran 1-3 %
  // slower than 64, prefetches in the loop 2-10 %. Even, so that the chunks keep the even and
  // odd blocks' accumulators apart.
  static constexpr int64_t kChunk = 64;
  static_assert(kChunk % 2 == 0);

  // Rows [0, 4) of the panel x tokens [t0, t0 + T): y[(t0 + t) * m + i + r]. The asm takes
  // 4 tokens at a time; a table of products covers 8 (one vmulps per row and block), so a
  // tile of 8 tokens makes one table per chunk for both of its 4-token groups. Fewer than 4
  // tokens go through Q32K's tile.
  template <int T>
  void tile(const Activations& a, int64_t t0, int64_t m, int64_t i, float* y) const {
    if constexpr (T < 4) {
      float out[4 * T];
      Q32K<TY>::template tile<4, T>(rows, a, t0, out);
      #pragma GCC unroll 4
      for (int r = 0; r < 4; ++r)
        #pragma GCC unroll 4
        for (int t = 0; t < T; ++t) y[(t0 + t) * m + i + r] = out[r * T + t];
    } else {
      constexpr int kGroups = T == 8 ? 2 : 1;  // groups of 4 tokens
      // Each accumulator (row pair p, token group g) carried from chunk to chunk in memory:
      // the same FMAs in the same order as one pass over all blocks, from +0 (the first
      // chunk's vxorps).
      alignas(32) float even[2][kGroups][8][8], odd[2][kGroups][8][8];
      // The chunk's products for all 4 rows at once, from locals: with a table per row pair
      // (each block's token scales loaded twice) and the members reloaded after every store,
      // that loop was 13 % of the tile's samples (perf, Llama-3.2-1B Q8_0 pp512, Zen 5). The
      // table holds one chunk (block c0 + j at prod[j]: 8 tokens per row, rows 0-3), as
      // Q32Panel's and Q32Zmm's do; the tile's token scales are 8 floats a block, one block
      // after another (Activations::dt_at).
      alignas(32) float prod[kChunk][32];
      const float* dt = a.dt_at(t0, 0);  // t0 % 8 == 0: the tile's 8 tokens, 8 floats a block
      const float* wd = scale;
      for (int64_t c0 = 0; c0 < nb; c0 += kChunk) {
        const int64_t c1 = c0 + kChunk < nb ? c0 + kChunk : nb;
        for (int64_t b = c0; b < c1; ++b) {
          const __m256 ad = _mm256_loadu_ps(dt + 8 * b);
          #pragma GCC unroll 4
          for (int r = 0; r < 4; ++r)
            _mm256_store_ps(prod[b - c0] + 8 * r, _mm256_mul_ps(_mm256_broadcast_ss(wd + 4 * b + r), ad));
        }
        for (int p = 0; p < 2; ++p)
          for (int g = 0; g < kGroups; ++g)
            four_tokens(a, t0, 4 * g, 2 * p, c0, c1, prod, even[p][g], odd[p][g]);
      }
      #pragma GCC unroll 2
      for (int p = 0; p < 2; ++p)
        #pragma GCC unroll 2
        for (int g = 0; g < kGroups; ++g)
          #pragma GCC unroll 2
          for (int r = 0; r < 2; ++r)
            #pragma GCC unroll 4
            for (int t = 0; t < 4; ++t)
              y[(t0 + 4 * g + t) * m + i + 2 * p + r] = tree16(
                  _mm256_load_ps(even[p][g][4 * r + t]), _mm256_load_ps(odd[p][g][4 * r + t]));
      if constexpr (T > 4 && T < 8) tile<T - 4>(a, t0 + 4, m, i, y);
    }
  }

  // Blocks [c0, c1) (c0 even) of tokens [t0 + s, t0 + s + 4) and the row pair starting at row
  // r0, products in the chunk's table, into the accumulators even and odd.
  void four_tokens(const Activations& a, int64_t t0, int s, int r0, int64_t c0, int64_t c1,
                   const float (*prod)[32], float (&even)[8][8], float (&odd)[8][8]) const {
    const uint8_t* pan = pairs + 128 * nb * (r0 / 2) + 128 * c0;
    const uint8_t* act = a.u + (t0 + s) * k + 32 * c0;
    const float* prd = prod[0] + 8 * r0 + s;
    half_pass(pan, act, prd, c1 - c0, even, c0 == 0);
    half_pass(pan + 128, act + 32, prd + 32, c1 - c0 - 1, odd, c0 == 0);
  }

  // Blocks 0, 2, 4, .. < n of the pair at pan (tokens at act, products at prd, all three at
  // their first block already) into the accumulators acc[4 r + t]: 8 lanes per row and token,
  // which start at +0 (the first chunk, first true) or at acc's values. Zeroed in registers:
  // with a zeroed array read back in every half pass, one chunk (k = 896) ran 142 GOP/s
  // against 151 (bench_matmul, Zen 5).
  void half_pass(const uint8_t* pan, const uint8_t* act, const float* prd, int64_t n,
                 float (&acc)[8][8], bool first) const {
    int64_t count = (n + 1) / 2;
    const int64_t k3 = 3 * k;
    static constexpr int32_t kMagic8[8] = {kMagic, kMagic, kMagic, kMagic,
                                           kMagic, kMagic, kMagic, kMagic};
    // ymm0-7: accumulators (row r, token t in ymm 4r + t); ymm8, ymm9: the rows' biases;
    // ymm10, ymm11: their codes; ymm12: the token; ymm13, ymm14: temporaries; ymm15: magic.
    __asm__ volatile(
        "test %[first], %[first]\n\t"
        "jz 3f\n\t"
        EMBER_ASM_ZERO_ACC
        "jmp 4f\n\t"
        "3:\n\t"
        EMBER_ASM_LOAD_ACC("acc")
        "4:\n\t"
        "vmovdqu (%[magic]), %%ymm15\n\t"
        "test %[count], %[count]\n\t"
        "jle 2f\n\t"
        "1:\n\t"
        "vmovdqa 0(%[pan]), %%ymm10\n\t"
        "vmovdqa 32(%[pan]), %%ymm11\n\t"
        "vmovdqa 64(%[pan]), %%ymm8\n\t"
        "vmovdqa 96(%[pan]), %%ymm9\n\t"
        EMBER_VNNI_TOKEN(0, "(%[act])", 0, 4)
        EMBER_VNNI_TOKEN(1, "(%[act],%[k],1)", 1, 5)
        EMBER_VNNI_TOKEN(2, "(%[act],%[k],2)", 2, 6)
        EMBER_VNNI_TOKEN(3, "(%[act],%[k3],1)", 3, 7)
        "add $256, %[pan]\n\t"
        "add $64, %[act]\n\t"
        "add $256, %[prd]\n\t"
        "dec %[count]\n\t"
        "jnz 1b\n\t"
        "2:\n\t"
        EMBER_ASM_STORE_ACC("acc")
        : [pan] "+r"(pan), [act] "+r"(act), [prd] "+r"(prd), [count] "+r"(count)
        : [magic] "r"(kMagic8), [k] "r"(k), [k3] "r"(k3), [acc] "r"(&acc[0][0]),
          [first] "r"(int(first))
        : "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",
          "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
  }
};

#undef EMBER_VNNI_TOKEN
#undef EMBER_VNNI_STEP
#undef EMBER_VNNI_ASM_PREFIX
