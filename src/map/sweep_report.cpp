// The sweep's HTML report: one self-contained page (inline SVG, no scripts, no network).
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "map/sweep.h"

namespace ember::map {
namespace {

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string protocol_ttft_note() {
  return "Ratios to the target's full prefill of the same prompts, measured in the same run. Handoff + decode: the "
         "source state is already in memory. + source prefill: the source also prefills the prefix up to the "
         "boundary the handoff reads. Stored load: the source state is read from its snapshot on disk instead "
         "(SHA-256 checked).";
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

struct Series {
  std::string name, color;
  std::vector<std::pair<double, double>> pts;  // (a, y)
  bool dashed = false;
};

// A line chart over x = anchor a in [x0, x1]; y linear in [y0, y1] or log10.
std::string chart(const std::string& title, const std::string& ylabel, const std::vector<Series>& series,
                  double x0, double x1, double y0, double y1, bool log_y) {
  const double W = 520, H = 300, ml = 70, mr = 20, mt = 30, mb = 45;
  auto X = [&](double x) { return ml + (x1 > x0 ? (x - x0) / (x1 - x0) : 0.5) * (W - ml - mr); };
  auto Y = [&](double y) {
    double v = log_y ? std::log10(y) : y;
    double lo = log_y ? std::log10(y0) : y0, hi = log_y ? std::log10(y1) : y1;
    if (v < lo) v = lo;
    if (v > hi) v = hi;
    return H - mb - (v - lo) / (hi - lo) * (H - mt - mb);
  };
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fmt("%.0f", W) + "\" height=\"" +
                  fmt("%.0f", H) + "\" role=\"img\"><title>" + esc(title) + "</title>";
  s += "<text x=\"" + fmt("%.0f", W / 2) + "\" y=\"18\" text-anchor=\"middle\" font-size=\"14\">" + esc(title) + "</text>";
  s += "<line x1=\"" + fmt("%.1f", ml) + "\" y1=\"" + fmt("%.1f", H - mb) + "\" x2=\"" + fmt("%.1f", W - mr) +
       "\" y2=\"" + fmt("%.1f", H - mb) + "\" stroke=\"black\"/>";
  s += "<line x1=\"" + fmt("%.1f", ml) + "\" y1=\"" + fmt("%.1f", mt) + "\" x2=\"" + fmt("%.1f", ml) + "\" y2=\"" +
       fmt("%.1f", H - mb) + "\" stroke=\"black\"/>";
  for (int a = int(x0); a <= int(x1); ++a)
    s += "<text x=\"" + fmt("%.1f", X(a)) + "\" y=\"" + fmt("%.1f", H - mb + 16) +
         "\" text-anchor=\"middle\" font-size=\"11\">" + std::to_string(a) + "</text>";
  s += "<text x=\"" + fmt("%.0f", (ml + W - mr) / 2) + "\" y=\"" + fmt("%.0f", H - 8) +
       "\" text-anchor=\"middle\" font-size=\"12\">recompute anchor a (a = L: pure mapping)</text>";
  const int ticks = 4;
  for (int i = 0; i <= ticks; ++i) {
    const double v = log_y ? std::pow(10.0, std::log10(y0) + (std::log10(y1) - std::log10(y0)) * i / ticks)
                           : y0 + (y1 - y0) * i / ticks;
    s += "<text x=\"" + fmt("%.1f", ml - 6) + "\" y=\"" + fmt("%.1f", Y(v) + 4) +
         "\" text-anchor=\"end\" font-size=\"10\">" + (log_y ? fmt("%.0e", v) : fmt("%.2f", v)) + "</text>";
  }
  s += "<text x=\"14\" y=\"" + fmt("%.0f", (mt + H - mb) / 2) + "\" font-size=\"12\" transform=\"rotate(-90 14 " +
       fmt("%.0f", (mt + H - mb) / 2) + ")\" text-anchor=\"middle\">" + esc(ylabel) + "</text>";
  int li = 0;
  for (const Series& se : series) {
    std::string pts;
    for (const auto& [x, y] : se.pts) pts += fmt("%.1f", X(x)) + "," + fmt("%.1f", Y(y)) + " ";
    s += "<polyline fill=\"none\" stroke=\"" + se.color + "\" stroke-width=\"2\"" +
         (se.dashed ? " stroke-dasharray=\"6 4\"" : "") + " points=\"" + pts + "\"/>";
    for (const auto& [x, y] : se.pts)
      s += "<circle cx=\"" + fmt("%.1f", X(x)) + "\" cy=\"" + fmt("%.1f", Y(y)) + "\" r=\"3\" fill=\"" + se.color + "\"/>";
    s += "<text x=\"" + fmt("%.0f", ml + 10) + "\" y=\"" + fmt("%.0f", mt + 12 + 14 * li) + "\" font-size=\"11\" fill=\"" +
         se.color + "\">" + esc(se.name) + "</text>";
    ++li;
  }
  return s + "</svg>";
}

}  // namespace

std::string SweepResult::html() const {
  int s = provenance.value("shared_layers", 0), L = 0;
  const SweepRow* identity = nullptr;
  const SweepRow* full = nullptr;
  std::vector<const SweepRow*> anchors;
  for (const SweepRow& r : rows) {
    if (r.config == "anchor") {
      anchors.push_back(&r);
      L = std::max(L, r.a);
    }
    if (r.config == "identity-reuse") identity = &r;
    if (r.config == "full-prefill") full = &r;
  }
  const double floor = 1e-9;  // bit-exact rows are drawn at this floor
  Series err{"mean relative logit error (0 drawn at 1e-9)", "#c0392b", {}, false};
  Series agree{"next-token agreement", "#2c7fb8", {}, false};
  Series greedy{"greedy prefix agreement (16 steps)", "#41ab5d", {}, false};
  Series ttft{"TTFT / full target prefill (measured)", "#8e44ad", {}, false};
  Series work{"1 - prefill work saved (weight MACs)", "#7f8c8d", {}, true};
  double emax = floor * 10;
  for (const SweepRow* r : anchors) {
    err.pts.push_back({double(r->a), std::max(r->mean_rel_err, floor)});
    emax = std::max(emax, r->mean_rel_err);
    agree.pts.push_back({double(r->a), r->comparisons ? double(r->agree) / r->comparisons : 0});
    greedy.pts.push_back({double(r->a), r->greedy_prefix_agreement});
    ttft.pts.push_back({double(r->a), r->ttft_ratio});
    work.pts.push_back({double(r->a), 1.0 - r->prefill_work_saved});
  }
  std::vector<Series> err_series = {err};
  if (identity) {
    emax = std::max(emax, identity->mean_rel_err);
    err_series.push_back({"identity reuse", "#e67e22", {{double(s), std::max(identity->mean_rel_err, floor)},
                                                          {double(L), std::max(identity->mean_rel_err, floor)}}, true});
  }
  double tmax = 1.0;
  for (const auto& p : ttft.pts) tmax = std::max(tmax, p.second);
  const double ehi = std::pow(10.0, std::ceil(std::log10(emax)));
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>ember boundary sweep</title>"
                  "<style>body{font-family:sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse}"
                  "td,th{border:1px solid #bbb;padding:3px 8px;text-align:right}th{background:#eee}"
                  ".note{background:#fff4d6;padding:8px;border-left:4px solid #e6a100}</style></head><body>\n";
  h += "<h1>Recompute-anchor boundary sweep</h1>\n";
  h += "<p class=\"note\"><b>" + esc(label) + "</b>: " +
       esc(label == "quantization-boundary"
               ? "source and target are the same model at two weight precisions; this is a quantization-boundary "
                 "study, not a cross-model result."
               : "source and target are different models that share a tokenizer.") + "</p>\n";
  h += "<p>source: <code>" + esc(provenance["source"].value("path", "")) + "</code> (" +
       esc(provenance["source"].value("identity", "").substr(0, 16)) + "&hellip;), target: <code>" +
       esc(provenance["target"].value("path", "")) + "</code> (" +
       esc(provenance["target"].value("identity", "").substr(0, 16)) + "&hellip;), shared layers s = " +
       std::to_string(s) + ", L = " + std::to_string(L) + ", evaluation prompts: " +
       std::to_string(provenance.value("eval_prompts", 0)) + ", mapper " +
       esc(provenance["mapper"].value("hash", "").substr(0, 16)) + "&hellip;</p>\n";
  h += chart("Fidelity: relative logit error vs anchor", "mean rel. logit error", err_series, s, L, floor, ehi, true);
  h += chart("Fidelity: agreement vs anchor", "fraction", {agree, greedy}, s, L, 0.0, 1.0, false);
  h += chart("Cost: time to first token vs anchor", "ratio to full prefill", {ttft, work}, s, L, 0.0, tmax, false);
  h += "\n<h2>Table</h2>\n<table><tr><th>config</th><th>a</th><th>agreement</th><th>bit-identical</th>"
       "<th>mean rel logit err</th><th>max rel logit err</th><th>mean KL (nats)</th><th>max KL</th>"
       "<th>greedy prefix agreement</th>"
       "<th>greedy exact</th><th>TTFT / full</th><th>work saved</th></tr>\n";
  for (const SweepRow& r : rows) {
    std::string name = r.pure_mapping ? "pure mapping" : r.exact_hybrid ? "exact hybrid" : r.config;
    h += "<tr><td>" + esc(name) + "</td><td>" + (r.config == "full-prefill" ? std::string("-") : std::to_string(r.a)) +
         "</td><td>" + std::to_string(r.agree) + "/" + std::to_string(r.comparisons) + "</td><td>" +
         std::to_string(r.bit_identical) + "</td><td>" + fmt("%.3e", r.mean_rel_err) + "</td><td>" +
         fmt("%.3e", r.max_rel_err) + "</td><td>" + fmt("%.3e", r.mean_kl) + "</td><td>" +
         fmt("%.3e", r.max_kl) + "</td><td>" + fmt("%.3f", r.greedy_prefix_agreement) + "</td><td>" +
         std::to_string(r.greedy_exact) + "</td><td>" + fmt("%.3f", r.ttft_ratio) + "</td><td>" +
         fmt("%.1f%%", 100 * r.prefill_work_saved) + "</td></tr>\n";
  }
  h += "</table>\n";
  if (full)
    h += "<p>Full target prefill: " + fmt("%.3f", full->ttft_seconds * 1e3) +
         " ms summed over the evaluation prompts (the TTFT reference). The TTFT above does not count the "
         "source's own prefill (the handoff starts from a cache the source already holds); the table below "
         "adds it, or the load of the stored source state.</p>\n";
  // The TTFT protocol's three figures and the budget's choice (plotting them is the report's).
  h += "<h2>Time to first token, three ways</h2>\n<p>" + esc(protocol_ttft_note()) +
       "</p>\n<table><tr><th>config</th><th>a</th><th>TTFT / full (handoff + decode)</th>"
       "<th>+ source prefill / full</th><th>stored load / full</th><th>handed-over bytes</th></tr>\n";
  for (const SweepRow& r : rows) {
    std::string name = r.pure_mapping ? "pure mapping" : r.exact_hybrid ? "exact hybrid" : r.config;
    h += "<tr><td>" + esc(name) + "</td><td>" + (r.config == "full-prefill" ? std::string("-") : std::to_string(r.a)) +
         "</td><td>" + fmt("%.3f", r.ttft_ratio) + "</td><td>" + fmt("%.3f", r.ttft_with_source_ratio) + "</td><td>" +
         (stored_measured ? fmt("%.3f", r.ttft_stored_ratio) : std::string("-")) + "</td><td>" +
         fmt("%.0f", r.handoff_bytes) + "</td></tr>\n";
  }
  h += "</table>\n";
  if (!choice.is_null()) {
    const nlohmann::json& ch = choice["chosen"];
    const nlohmann::json& ho = choice["held_out"];
    std::string name = ch["config"].get<std::string>();
    if (name == "anchor") name += " a = " + std::to_string(ch["a"].get<int>());
    h += "<h2>Choice</h2>\n<p>Budget <code>" + esc(choice["budget"].get<std::string>()) + "</code> judged on " +
         esc(choice["judged_on"].get<std::string>()) + ": <b>" + esc(name) + "</b>. Held out: " +
         std::to_string(ho["agree"].get<int64_t>()) + "/" + std::to_string(ho["comparisons"].get<int64_t>()) +
         " next tokens agree, mean KL " + fmt("%.3e", ho["mean_kl"].get<double>()) + ", TTFT / full " +
         fmt("%.3f", ho["ttft_ratio_vs_full_prefill"].get<double>()) + " (with the source prefill " +
         fmt("%.3f", ho["ttft_with_source_ratio"].get<double>()) + "), work saved " +
         fmt("%.1f%%", 100 * ho["prefill_work_saved"].get<double>()) + ".</p>\n";
  }
  h += "</body></html>\n";
  return h;
}

}  // namespace ember::map
