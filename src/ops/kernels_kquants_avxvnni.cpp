// The K-quant kernels of kernels_kquants_avx2.cpp for the avxvnni path (kernels_avxvnni.cpp).
#define EMBER_AVX2_VNNI 1
#include "ops/kernels_kquants_avx2.cpp"
