// libFuzzer target for the llama.cpp `ggsq` v3 reader (kv/llamacpp_state.h): any byte string
// must be accepted or refused with an ember::Error, never crash, hang or allocate more than a
// few times the input. Each input is read against two model geometries: 2 layers x 1 KV head
// x head_dim 32 (no rotation) and 1 layer x 1 KV head x head_dim 64 (quantized rows rotated).
// Seeds: fuzz/corpus/llamacpp/ (tests/kv/llamacpp_fuzz_smoke_test.cpp writes and checks them).
//   build-fuzz/fuzz/kv_llamacpp_fuzz fuzz/corpus/llamacpp -max_len=65536
#include <cstddef>
#include <cstdint>

#include "kv/llamacpp_state.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  for (const ember::kv::LlamaCppTarget& t : {ember::kv::LlamaCppTarget{2, 1, 32, 64, 512},
                                             ember::kv::LlamaCppTarget{1, 1, 64, 64, 512}}) {
    try {
      (void)ember::kv::parse_llamacpp_state({data, size}, t, "fuzz.seq");
    } catch (const ember::Error&) {
    }
  }
  return 0;
}
