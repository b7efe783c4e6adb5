// The tile driver: rows in blocks of K::kR, tokens in blocks of K::kT (remainders by smaller
// tiles), and the panel driver (run_panels, at the end) for the SIMD translation units only (kernels_avx2.cpp, kernels_kquants_avx2.cpp,
// kernels_avx512.cpp and through it kernels_avx512vnni.cpp).
//
// Why this file is included inside a namespace and has no include guard: each ISA file is
// compiled with its own -m flags and must not share inline code with another (the linker
// could keep one file's copy of a shared inline function for every caller, running AVX-512
// code on a CPU without it; kernels_avx512.cpp's opening note). So the driver is not a
// header of inline functions: its text is included into each ISA file's anonymous namespace
// (`namespace ember::ops::detail { namespace { ... #include "ops/tile_driver.h" ... } }`),
// and every file gets its own internal copy compiled with its own flags. The including file
// defines, before the include:
//   int64_t tile_l2_budget();  // bytes of activations a token chunk may hold in L2
// and the kernel classes K with
//   K::kType, K::kR, K::kT, K::kActBytes and K::template tile<R, T>(rows, a, t0, out):
//   rows [R] weight row pointers, tokens [t0, t0 + T) of a -> out [R][T];
// and, for run_panels, the panel classes P with
//   P::bytes(k), bind(mem, k), fill(rows[4]), P::kT and P::template tile<T>(a, t0, m, i, y):
//   4 rows decoded once into 64-byte aligned memory, then tokens [t0, t0 + T) of a ->
//   y[(t0 + t) * m + i + r].
// It includes nothing itself (an #include inside a namespace would nest the std headers).
//
// The driver changes no bit: each accumulator of a tile receives its contributions in the
// canonical order whatever R, T and the chunking are (ember_ops_tests compares every path
// with the scalar reference bit for bit).
#if !defined(__AVX2__)
#error "ops/tile_driver.h is for the SIMD translation units only (see its opening note)"
#endif

template <class K, int R, int T>
void tile_call(const WeightMatrix& W, const Activations& a, int64_t rb, int64_t i, int64_t t0,
               float* y) {
  const uint8_t* rows[R];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) rows[r] = W.data + (i + r) * rb;
  float out[R * T];
  K::template tile<R, T>(rows, a, t0, out);
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 8
    for (int t = 0; t < T; ++t) y[(t0 + t) * W.rows + i + r] = out[r * T + t];
}

// A tile of R rows x `rem` tokens, rem < T (the remainder of a token chunk).
template <class K, int R, int T>
void tail_call(const WeightMatrix& W, const Activations& a, int64_t rb, int64_t i, int64_t t0,
               int64_t rem, float* y) {
  if constexpr (T > 1) {
    if (rem == T - 1) tile_call<K, R, T - 1>(W, a, rb, i, t0, y);
    else tail_call<K, R, T - 1>(W, a, rb, i, t0, rem, y);
  }
}

// Rows [i, i + R) x tokens [t0, t1).
template <class K, int R>
void row_block(const WeightMatrix& W, const Activations& a, int64_t rb, int64_t i, int64_t t0,
               int64_t t1, float* y) {
  int64_t t = t0;
  for (; t + K::kT <= t1; t += K::kT) tile_call<K, R, K::kT>(W, a, rb, i, t, y);
  if (t < t1) tail_call<K, R, K::kT>(W, a, rb, i, t, t1 - t, y);
}

// Tokens per chunk: the chunk's activations (about K::kActBytes per element of k) stay in
// L2 while every row block of the thread's range passes over them; the weights are streamed
// once per chunk instead (the activations of 512 tokens of a 4864-wide row exceed L2).
template <class K>
int64_t token_chunk(int64_t k) {
  const int64_t c = tile_l2_budget() / (k * K::kActBytes) / K::kT * K::kT;
  return c < K::kT ? K::kT : c;
}

// Two rows, ia and ib, x tokens [t0, t0 + T): the tile of the streamed walk below.
template <class K, int T>
void pair_call(const uint8_t* const* rows, const Activations& a, int64_t ia, int64_t ib, int64_t t0, int64_t m,
               float* y) {
  float out[2 * T];
  K::template tile<2, T>(rows, a, t0, out);
  #pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    y[(t0 + t) * m + ia] = out[t];
    y[(t0 + t) * m + ib] = out[T + t];
  }
}

// The same for `rem` < T tokens.
template <class K, int T>
void pair_tail(const uint8_t* const* rows, const Activations& a, int64_t ia, int64_t ib, int64_t t0, int64_t rem,
               int64_t m, float* y) {
  if constexpr (T > 1) {
    if (rem == T - 1) pair_call<K, T - 1>(rows, a, ia, ib, t0, m, y);
    else pair_tail<K, T - 1>(rows, a, ia, ib, t0, rem, m, y);
  }
}

template <class K>
void run_tiles(const WeightMatrix& W, const Activations& a, int64_t r0, int64_t r1, float* y) {
  const int64_t rb = weight_row_bytes(K::kType, W.cols);
  // Decode and small batches (a few tokens: a server's step, a check's positions): the
  // weights come from memory once and every token of the batch meets a row while it is in
  // L1. Two row streams, [r0, mid) and [mid, r1), one row of each per step. Each stream walks
  // memory strictly in order, which the hardware prefetcher follows (a tile of adjacent rows,
  // i.e. several short interleaved streams, measured at less than half the bandwidth), and
  // the two rows' accumulator chains overlap in the core (one row alone is bound by its FMA
  // chain: +15 % for a decode step, 1 thread, Zen 4). The tiles also prefetch each stream
  // ahead in software (prefetch.h): the hardware prefetcher alone fell behind. Up to
  // kStreamTokens tokens: a Qwen2.5-0.5B forward of 2 tokens took 2.0x one token's time in
  // the prefill walk below, 1.3x in this one (1 thread, Zen 4).
  if (a.n <= kStreamTokens) {
    const int64_t half = (r1 - r0) / 2;
    for (int64_t j = 0; j < half; ++j) {
      const int64_t ia = r0 + j, ib = r0 + half + j;
      const uint8_t* rows[2] = {W.data + ia * rb, W.data + ib * rb};
      int64_t t = 0;
      for (; t + K::kT <= a.n; t += K::kT) pair_call<K, K::kT>(rows, a, ia, ib, t, W.rows, y);
      if (t < a.n) pair_tail<K, K::kT>(rows, a, ia, ib, t, a.n - t, W.rows, y);
    }
    if ((r1 - r0) % 2) row_block<K, 1>(W, a, rb, r1 - 1, 0, a.n, y);
    return;
  }
  // Prefill: token chunks outermost, then row blocks, then the chunk's token tiles.
  const int64_t chunk = token_chunk<K>(a.k);
  for (int64_t t0 = 0; t0 < a.n; t0 += chunk) {
    const int64_t t1 = a.n < t0 + chunk ? a.n : t0 + chunk;
    int64_t i = r0;
    for (; i + K::kR <= r1; i += K::kR) row_block<K, K::kR>(W, a, rb, i, t0, t1, y);
    for (; i < r1; ++i) row_block<K, 1>(W, a, rb, i, t0, t1, y);
  }
}

// The memory of a block-major row panel (Q32Panel, KPanel, Q32Zmm, KZmm): a row block's columns as k / E
// blocks of kBlock = B panel bytes each, at run_panels' allocation.
template <int64_t E, int64_t B>
struct BlockPanel {
  static constexpr int64_t kBlock = B;
  int64_t k = 0, nb = 0;
  uint8_t* panel = nullptr;

  static int64_t bytes(int64_t k) { return B * (k / E); }

  void bind(uint8_t* mem, int64_t k_) {
    k = k_, nb = k_ / E;
    panel = mem;
  }
};

// The last rem < P::kT tokens of a chunk: the tile of T = rem tokens.
template <class P, int T>
void panel_tail(const P& panel, const Activations& a, int64_t t0, int64_t rem, int64_t m,
                int64_t i, float* y) {
  if constexpr (T >= 1) {
    if (rem == T) panel.template tile<T>(a, t0, m, i, y);
    else panel_tail<P, T - 1>(panel, a, t0, rem, m, i, y);
  }
}

// Prefill through panels (Q32Panel, Q32Vnni, KPanel; Q32Zmm on avx512vnni): token chunks, then row blocks of 4, each decoded
// once into the panel, then the chunk's token tiles. Decode and small batches (the streamed
// walk of tile_driver.h), and the last rows of a range that are fewer than 4, go through K's
// tiles; without memory for a panel, everything does.
template <class K, class P>
void run_panels(const WeightMatrix& W, const Activations& a, int64_t r0, int64_t r1, float* y) {
  const int64_t bytes = (P::bytes(a.k) + 63) / 64 * 64;
  void* mem = a.n > kStreamTokens && r1 - r0 >= 4 ? std::aligned_alloc(64, size_t(bytes)) : nullptr;
  if (mem == nullptr) {
    run_tiles<K>(W, a, r0, r1, y);
    return;
  }
  P panel;
  panel.bind(static_cast<uint8_t*>(mem), a.k);
  const int64_t rb = weight_row_bytes(K::kType, W.cols);
  // Whole panel tiles per chunk (token_chunk rounds to K's tile): 512 tokens at k = 2048 were
  // chunks of 510 and 2, each row block filled twice and a tile of 6 and one of 2 left over.
  const int64_t whole = token_chunk<K>(a.k) / P::kT * P::kT;
  const int64_t chunk = whole < P::kT ? P::kT : whole;
  for (int64_t t0 = 0; t0 < a.n; t0 += chunk) {
    const int64_t t1 = a.n < t0 + chunk ? a.n : t0 + chunk;
    int64_t i = r0;
    for (; i + 4 <= r1; i += 4) {
      const uint8_t* rows[4] = {W.data + i * rb, W.data + (i + 1) * rb, W.data + (i + 2) * rb,
                                W.data + (i + 3) * rb};
      panel.fill(rows);
      // The next row block's bytes into L2 while this one's tiles run: fill read them
      // straight from memory, one row after another, and waited (2.5 % of a Qwen2.5-0.5B
      // prefill in fill, mostly on those loads).
      if (i + 8 <= r1)
        for (int64_t o = 0; o < 4 * rb; o += 64)
          _mm_prefetch(reinterpret_cast<const char*>(W.data + (i + 4) * rb + o), _MM_HINT_T1);
      int64_t t = t0;
      for (; t + P::kT <= t1; t += P::kT) panel.template tile<P::kT>(a, t, W.rows, i, y);
      if (t < t1) panel_tail<P, P::kT - 1>(panel, a, t, t1 - t, W.rows, i, y);
    }
    for (; i < r1; ++i) row_block<K, 1>(W, a, rb, i, t0, t1, y);
  }
  std::free(mem);
}
