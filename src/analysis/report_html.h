#pragma once
// The self-contained HTML page of `kv compare --report OUT.html` (docs/compare.md, "HTML
// report"): no network, no scripts, inline SVG only. One heatmap cell per (layer, KV head)
// for each of K cosine, V cosine, K MSE and V MSE; with diagnostics, a (step, layer) map of
// the attention-output cosine and the logit agreement over the steps.
#include <string>

#include "analysis/compare.h"

namespace ember::kv {

std::string report_html(const CompareReport& r);

}  // namespace ember::kv
