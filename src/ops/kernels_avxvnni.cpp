// The AVX2 kernels of kernels_avx2.cpp again, built with AVX-VNNI (-mavxvnni, CMakeLists.txt):
// the VEX vpdpbusd / vpdpwssd on ymm replace the vpmaddubsw / vpmaddwd pairs of the int8 dot
// products (kernels_avx2_driver.h: dot4, dot2_acc). Exact integer arithmetic either way, so
// this table (the avxvnni path) gives the same bits as every other path (tests/ops).
#define EMBER_AVX2_VNNI 1
#include "ops/kernels_avx2.cpp"
