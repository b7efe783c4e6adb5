// `ember --version` (cli/commands.h): what a bug report needs to name the binary exactly.
#include <string>

#include "cli/commands.h"
#include "util/build_info.h"
#include "util/simd.h"

namespace ember::cli {

std::string version_text() {
  return std::string(kProducer) + " (build " + std::to_string(build_number()) + ", commit " + build_commit() +
         ")\nsimd: " + simd_name(active_simd()) + " (this CPU supports up to " + simd_name(detect_simd()) + ")";
}

}  // namespace ember::cli
