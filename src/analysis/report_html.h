#pragma once
// The self-contained HTML page of `kv compare --report OUT.html` (docs/compare.md, "HTML
// report"): no network, no scripts, inline SVG only. One heatmap cell per (layer, KV head)
// for each of K cosine, V cosine, K MSE and V MSE; with diagnostics, a (step, layer) map of
// the attention-output cosine and the logit agreement over the steps.
#include <string>

#include "analysis/compare.h"

namespace ember::kv {

std::string report_html(const CompareReport& r);

// The page's building blocks, shared with the other reports of src/analysis/ (the KV
// quantization study): HTML escaping, and the heat colour of a distance in [0, 1] (pale
// yellow = near, dark red = far) with the position of x on a log10 scale [10^lo, 10^hi].
std::string html_escape(const std::string& s);
std::string heat_colour(double t);
double log_scale_position(double x, double lo, double hi);

}  // namespace ember::kv
