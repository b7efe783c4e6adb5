// The tile driver: rows in blocks of K::kR, tokens in blocks of K::kT (remainders by smaller
// tiles), for the SIMD translation units only (kernels_avx2.cpp, kernels_kquants_avx2.cpp,
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
//   rows [R] weight row pointers, tokens [t0, t0 + T) of a -> out [R][T].
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
