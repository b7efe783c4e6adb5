// libFuzzer target for the KVC1 reader: any byte string must be accepted or refused with an
// ember::Error, never crash, hang or allocate more than the input implies. Seeds:
// fuzz/corpus/kvc1/. Build: CXX=clang++ cmake -DEMBER_FUZZ=ON ...; run:
//   build-fuzz/fuzz/kvc1_fuzz fuzz/corpus/kvc1 -max_len=65536
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kv/kvc1.h"
#include "kv/kvc1_snapshot.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto bytes = std::make_shared<const std::vector<uint8_t>>(data, data + size);
  try {
    const ember::kv::Kvc1File f = ember::kv::Kvc1File::parse(bytes, "fuzz.kvc");
    // A verified container bounds the geometry by its own size, so this allocation is too.
    (void)ember::kv::kvc1_to_state(f, {ember::kv::Accept::any});
  } catch (const ember::Error&) {
  }
  return 0;
}
