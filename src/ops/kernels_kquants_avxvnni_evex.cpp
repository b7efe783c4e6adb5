// The K-quant kernels for the avxvnni-evex path (kernels_avxvnni_evex.cpp).
#define EMBER_AVX2_VNNI 2
#include "ops/kernels_kquants_avx2.cpp"
