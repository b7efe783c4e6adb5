// libFuzzer target for the calibration-set reader (ember.map-calibration.v2: manifest.json +
// stats.f64le, the fits' sufficient statistics), what `map fit` loads. One input is a
// manifest and its rows payload (fuzz/payload_input.h: layout and hash placeholders), fed to
// map::CalibrationSet::parse, the in-memory half of CalibrationSet::read. Contract under test:
// any input is accepted or refused with an ember::Error; never a crash, hang, out-of-bounds
// read, or an allocation sized by the manifest before the payload is known to hold it. An
// accepted set passes its own validate() again. Seeds: fuzz/corpus/calibration/.
#include <cstddef>
#include <cstdint>

#include "map/calibration.h"
#include "payload_input.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const ember::fuzz::ManifestAndPayload in = ember::fuzz::split_manifest_and_payload(data, size);
  ember::map::CalibrationSet s;
  try {
    s = ember::map::CalibrationSet::parse(in.manifest, reinterpret_cast<const uint8_t*>(in.payload.data()),
                                          in.payload.size(), "fuzz/manifest.json", "fuzz/stats.f64le");
  } catch (const ember::Error&) {
    return 0;
  }
  try {
    s.validate("again");
  } catch (const ember::Error&) {
    __builtin_trap();  // parse() accepted a set its own consistency check refuses
  }
  return 0;
}
