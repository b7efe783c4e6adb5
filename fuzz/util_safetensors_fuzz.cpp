// libFuzzer target for the safetensors reader (util/safetensors.h): any byte string must be
// accepted or refused with an ember::Error, never crash, hang or allocate more than the input
// implies. A file that passes is walked tensor by tensor, touching every byte the header
// claims. Seeds: fuzz/corpus/safetensors/. Build: CXX=clang++ cmake -DEMBER_FUZZ=ON ...; run:
//   build-fuzz/fuzz/util_safetensors_fuzz fuzz/corpus/safetensors -max_len=65536
#include <cstddef>
#include <cstdint>
#include <span>

#include "util/error.h"
#include "util/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const ember::safetensors::Header h = ember::safetensors::parse_header({data, size}, "fuzz.safetensors");
    unsigned sum = 0;
    for (const auto& t : h.tensors)
      for (uint64_t i = t.begin; i < t.end; ++i) sum += data[i];
    (void)sum;
  } catch (const ember::Error&) {
  }
  return 0;
}
