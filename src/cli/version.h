#pragma once
// What the binary says about itself: `ember --version`, and the stamp on every HTML report it
// writes (util/html_report.h), so a saved page names its inputs, its build and its date.
#include <string>
#include <utility>
#include <vector>

#include "util/html_report.h"

namespace ember::cli {

// `ember --version`: the release, the commit and commit count it was built from, and the SIMD
// path the engine runs on here (EMBER_SIMD, else the best this CPU has).
std::string version_text();
// "ember 0.1.0 (build N, commit H)": the producer a report or certificate names.
std::string producer_text();

// The stamp of a report made now from `inputs` ((role, path) pairs; empty paths are left out):
// the release, commit and commit count, and the current time in ISO-8601 UTC.
html::Stamp report_stamp(const std::vector<std::pair<std::string, std::string>>& inputs);

}  // namespace ember::cli
