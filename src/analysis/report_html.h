#pragma once
// The self-contained HTML page of `kv compare --html OUT.html` (docs/compare.md, "HTML
// report"): no network, no scripts, inline SVG only, drawn with util/html_report.h (the one
// set of heatmap / chart / table primitives every ember report uses). One heatmap cell per
// (layer, KV head) for each of K cosine, V cosine, K MSE and V MSE, each with a colour legend
// and its exact value on hover; with diagnostics, a (step, layer) map of the attention-output
// cosine and a chart of the logit distance and KL over the steps.
#include <string>

#include "analysis/compare.h"
#include "util/html_report.h"

namespace ember::analysis {

// `stamp` names the inputs (snapshots, model), the build and the date; the canonical JSON
// report has none of them by design, the page a person saves does.
std::string report_html(const CompareReport& r, const html::Stamp& stamp = {});

}  // namespace ember::analysis
