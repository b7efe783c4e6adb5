// The AVX2 kernels of kernels_avx2.cpp again, built with AVX-VNNI (-mavx2 -mavxvnni,
// CMakeLists.txt): the VEX vpdpbusd on ymm replaces the vpmaddubsw / vpmaddwd pairs of the
// 32-block types' int8 dot products (kernels_avx2_driver.h: dot4; the bias form of
// Q32K::half_pass), and the prefill of Q8_0 / Q4_0 / Q5_0 takes Q32Vnni
// (ops/q32_vnni_panel.h). Exact integer arithmetic either way, so this table (the avxvnni
// path) gives the same bits as every other path (tests/ops). The K quants are built the same
// way (kernels_kquants_avxvnni.cpp: vpdpwssd in their panel and dot2_acc).
#define EMBER_AVX2_VNNI 1
#include "ops/kernels_avx2.cpp"
