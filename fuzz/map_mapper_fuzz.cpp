// libFuzzer target for the mapper reader (ember.kv-mapper.v1: manifest.json + weights.f64le),
// the document `map apply`, `map hybrid` and the studies load. One input is a manifest and its
// weights payload (fuzz/payload_input.h explains the layout and the hash placeholders), fed to
// map::Mapper::parse, the in-memory half of Mapper::read. Contract under test: any input is
// accepted or refused with an ember::Error; never a crash, hang, out-of-bounds read or an
// allocation from an unchecked size (the manifest's shapes decide how many f64 are read from
// the payload). An accepted mapper's hash is a function of what was read: recomputing it
// gives the same value. Seeds: fuzz/corpus/mapper/.
#include <cstddef>
#include <cstdint>

#include "map/mapper.h"
#include "payload_input.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const ember::fuzz::ManifestAndPayload in = ember::fuzz::split_manifest_and_payload(data, size);
  ember::map::Mapper m;
  try {
    m = ember::map::Mapper::parse(in.manifest, reinterpret_cast<const uint8_t*>(in.payload.data()),
                                  in.payload.size(), "fuzz/manifest.json", "fuzz/weights.f64le");
  } catch (const ember::Error&) {
    return 0;
  }
  if (m.hash() != m.hash()) __builtin_trap();
  if (m.heads.size() != size_t(m.target.n_layers) * size_t(m.target.n_kv_heads)) __builtin_trap();
  return 0;
}
