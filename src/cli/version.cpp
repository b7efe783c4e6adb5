// `ember --version` and the report stamp (cli/version.h): what a bug report or a saved page
// needs to name the binary exactly.
#include "cli/version.h"

#include "cli/commands.h"
#include "util/build_info.h"
#include "util/iso_time.h"
#include "util/simd.h"

namespace ember::cli {
namespace {

std::string build_text() {
  return std::string(kProducer) + " (build " + std::to_string(build_number()) + ", commit " + build_commit() + ")";
}

}  // namespace

std::string producer_text() { return build_text(); }

std::string version_text() {
  return build_text() + "\nsimd: " + simd_name(active_simd()) + " (this CPU supports up to " +
         simd_name(detect_simd()) + ")";
}

html::Stamp report_stamp(const std::vector<std::pair<std::string, std::string>>& inputs) {
  html::Stamp s;
  for (const auto& [role, path] : inputs)
    if (!path.empty()) s.inputs.push_back({role, path});
  s.producer = build_text();
  s.date = iso8601_utc_now();
  return s;
}

}  // namespace ember::cli
