// The K-quant kernels again for the avxvnni table: the prefill panel's int16 dot products
// accumulate with AVX-VNNI's vpdpwssd (VEX) in place of vpmaddwd + vpaddd (ops/k_panel.h).
#define EMBER_AVX2_VNNI 1
#include "ops/kernels_kquants_avx2.cpp"
