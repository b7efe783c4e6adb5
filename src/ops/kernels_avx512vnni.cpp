// The AVX-512 kernels again, built with AVX512_VNNI (-mavx512vnni, CMakeLists.txt): vpdpbusd
// and vpdpwssd replace the maddubs/madd pairs of the integer dot products. Exact integer
// arithmetic either way, so this table gives the same bits as every other path (tests/ops);
// it is only faster (bench_engine: decode on Zen 4). Everything but the table accessor has
// internal linkage, so the two builds of the source cannot share a compiled function.
#define EMBER_KERNELS_VNNI 1
#include "ops/kernels_avx512.cpp"
