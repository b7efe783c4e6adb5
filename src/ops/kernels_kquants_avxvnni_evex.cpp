// The K-quant kernels again for the avxvnni-evex table: the EVEX encoding of the avxvnni build's
// vpdpwssd (kernels_kquants_avxvnni.cpp), its validation twin on CPUs without AVX-VNNI.
#define EMBER_AVX2_VNNI 2
#include "ops/kernels_kquants_avx2.cpp"
