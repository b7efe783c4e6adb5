// The sweep's HTML report: one self-contained page (inline SVG, no scripts, no network), drawn
// with util/html_report.h like every ember report. Fidelity and cost against the anchor a,
// then the trade-off itself: fidelity against the TTFT ratio, one labelled point per boundary.
#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "map/sweep.h"
#include "util/html_report.h"

namespace ember::map {
namespace {

using html::escape;

std::string name_of(const SweepRow& r) {
  if (r.config == "identity-reuse") return "identity";
  if (r.config == "full-prefill") return "full prefill";
  return std::string(r.exact_hybrid ? "hybrid " : r.pure_mapping ? "mapped " : "") + "a=" + std::to_string(r.a);
}

double agreement(const SweepRow& r) { return r.comparisons ? double(r.agree) / double(r.comparisons) : 0.0; }

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

// The TTFT ratio to plot for a row: the one that counts the source's prefill when the result
// has it (a row key naming "with_source" or "incl_source", and "ratio"), else the handoff-only ratio.
struct TtftColumn {
  std::string key, label;
};
TtftColumn ttft_column(const nlohmann::json& rows) {
  for (const auto& r : rows)
    for (const auto& [k, v] : r.items())
      if ((k.find("incl_source") != std::string::npos || k.find("with_source") != std::string::npos) && k.find("ratio") != std::string::npos && v.is_number())
        return {k, "TTFT incl. source prefill / full target prefill"};
  return {"ttft_ratio_vs_full_prefill", "TTFT / full target prefill (source prefill not counted)"};
}

// The floor a log axis draws 0 at: a decade below the smallest positive value, at most 1e-9.
double log_floor(const std::vector<double>& v) {
  double m = 1e-8;
  for (double x : v)
    if (x > 0 && std::isfinite(x)) m = std::min(m, x);
  return std::max(1e-15, std::pow(10.0, std::floor(std::log10(m)) - 1));
}

html::Axis axis(const std::string& name, bool log, std::optional<double> lo, std::optional<double> hi, bool integer) {
  html::Axis a;
  a.label = name;
  a.log = log;
  a.lo = lo;
  a.hi = hi;
  a.integer = integer;
  return a;
}

std::string chart(const std::string& caption, const std::string& cls, const html::Axis& x, const html::Axis& y,
                  std::vector<html::Series> series, int height) {
  html::Chart c;
  c.caption = caption;
  c.svg_class = cls;
  c.x = x;
  c.y = y;
  c.series = std::move(series);
  c.height = height;
  return html::chart(c);
}

}  // namespace

std::string SweepResult::html(const html::Stamp& stamp) const {
  const nlohmann::json j = to_json();
  const TtftColumn tc = ttft_column(j["rows"]);
  std::vector<double> ttft;  // per row, from the chosen column
  for (const auto& r : j["rows"]) ttft.push_back(r.contains(tc.key) && r[tc.key].is_number() ? r[tc.key].get<double>() : NAN);

  int s = provenance.value("shared_layers", 0), L = 0;
  const SweepRow* identity = nullptr;
  const SweepRow* full = nullptr;
  std::vector<size_t> anchors;
  for (size_t i = 0; i < rows.size(); ++i) {
    const SweepRow& r = rows[i];
    if (r.config == "anchor") {
      anchors.push_back(i);
      L = std::max(L, r.a);
    }
    if (r.config == "identity-reuse") identity = &r;
    if (r.config == "full-prefill") full = &r;
  }
  std::vector<double> errs;
  for (const SweepRow& r : rows) {
    errs.push_back(r.mean_rel_err);
    errs.push_back(r.mean_kl);
  }
  const double floor = log_floor(errs);
  const std::string floor_note = "0 (bit-identical) drawn at " + html::decade_label(int(std::lround(std::log10(floor))));
  auto lg = [&](double v) { return std::max(v, floor); };
  auto pt = [](double x, double y, std::string text, std::string title) {
    html::ChartPoint p;
    p.x = x;
    p.y = y;
    p.label = std::move(text);
    p.title = std::move(title);
    return p;
  };
  const html::Axis anchor_axis = axis("recompute anchor a (a = s: exact hybrid, a = L: pure mapping)", false,
                                      double(s), double(std::max(L, s + 1)), true);

  // 1-3: against the anchor.
  html::Series err{"mean relative logit error", "#c53030", {}, true, false};
  html::Series kl{"mean KL(target || handoff), nats", "#805ad5", {}, true, false};
  html::Series agree{"next-token agreement", "#2b6cb0", {}, true, false};
  html::Series greedy{"greedy prefix agreement (" + std::to_string(options.greedy_steps) + " steps)", "#2f855a", {}, true, false};
  html::Series cost{tc.label, "#dd6b20", {}, true, false};
  html::Series work{"1 - prefill work saved (weight MACs)", "#718096", {}, true, true};
  for (size_t i : anchors) {
    const SweepRow& r = rows[i];
    const double a = r.a;
    const std::string n = name_of(r) + ": ";
    err.points.push_back(pt(a, lg(r.mean_rel_err), "", n + "mean relative logit error " + html::num(r.mean_rel_err)));
    kl.points.push_back(pt(a, lg(r.mean_kl), "", n + "mean KL " + html::num(r.mean_kl) + " nats"));
    agree.points.push_back(pt(a, agreement(r), "", n + std::to_string(r.agree) + "/" + std::to_string(r.comparisons) + " next tokens agree"));
    greedy.points.push_back(pt(a, r.greedy_prefix_agreement, "", n + "greedy prefix agreement " + html::num(r.greedy_prefix_agreement)));
    cost.points.push_back(pt(a, ttft[i], "", n + tc.label + " = " + html::num(ttft[i])));
    work.points.push_back(pt(a, 1.0 - r.prefill_work_saved, "", n + "prefill work saved " + html::num(100 * r.prefill_work_saved, "%.1f") + " %"));
  }
  std::vector<html::Series> fid = {err, kl};
  if (identity) {
    fid.push_back({"identity reuse: relative error", "#c53030", {pt(s, lg(identity->mean_rel_err), "", "identity reuse: " + html::num(identity->mean_rel_err)), pt(L, lg(identity->mean_rel_err), "", "identity reuse: " + html::num(identity->mean_rel_err))}, true, true});
    fid.push_back({"identity reuse: KL", "#805ad5", {pt(s, lg(identity->mean_kl), "", "identity reuse: " + html::num(identity->mean_kl) + " nats"), pt(L, lg(identity->mean_kl), "", "identity reuse: " + html::num(identity->mean_kl) + " nats")}, true, true});
  }
  std::string h = html::page_begin("Recompute-anchor boundary sweep", stamp);
  h += "<p class=\"note\"><b>" + escape(label) + "</b>: " +
       escape(label == "quantization-boundary"
                  ? "source and target are the same model at two weight precisions; this is a quantization-boundary "
                    "study, not a cross-model result."
                  : label == "same-base"
                        ? "source and target are different models that share a base (lower layers byte for byte) "
                          "and a tokenizer."
                        : "source and target are different models that share a tokenizer.") +
       "</p>\n";
  h += "<p>source: <code>" + escape(provenance["source"].value("path", "")) + "</code> (<code>" +
       escape(provenance["source"].value("identity", "").substr(0, 16)) + "&hellip;</code>), target: <code>" +
       escape(provenance["target"].value("path", "")) + "</code> (<code>" +
       escape(provenance["target"].value("identity", "").substr(0, 16)) + "&hellip;</code>), shared layers s = " +
       std::to_string(s) + ", L = " + std::to_string(L) + ", evaluation prompts: " +
       std::to_string(provenance.value("eval_prompts", 0)) + ", " +
       escape(provenance["mapper"].value("kind", "")) + " mapper <code>" +
       escape(provenance["mapper"].value("hash", "").substr(0, 16)) + "&hellip;</code></p>\n";

  // 4-5: the trade-off, one labelled point per configuration.
  html::Series t_agree{"next-token agreement", "#2b6cb0", {}, false, false};
  html::Series t_greedy{"greedy prefix agreement", "#2f855a", {}, false, false};
  html::Series t_err{"mean relative logit error", "#c53030", {}, false, false};
  html::Series t_kl{"mean KL, nats", "#805ad5", {}, false, false};
  for (size_t i = 0; i < rows.size(); ++i) {
    const SweepRow& r = rows[i];
    const std::string n = name_of(r), x = " at TTFT ratio " + html::num(ttft[i], "%.3f");
    t_agree.points.push_back(pt(ttft[i], agreement(r), n, n + ": " + std::to_string(r.agree) + "/" + std::to_string(r.comparisons) + " next tokens agree" + x));
    t_greedy.points.push_back(pt(ttft[i], r.greedy_prefix_agreement, "", n + ": greedy prefix agreement " + html::num(r.greedy_prefix_agreement) + x));
    t_kl.points.push_back(pt(ttft[i], lg(r.mean_kl), "", n + ": mean KL " + html::num(r.mean_kl) + " nats" + x));
    t_err.points.push_back(pt(ttft[i], lg(r.mean_rel_err), n, n + ": mean relative logit error " + html::num(r.mean_rel_err) + x));
  }
  const html::Axis ttft_axis = axis(tc.label, false, 0.0, std::nullopt, false);
  h += "<h2>Fidelity against time to first token</h2>\n<p class=\"muted\">One point per configuration, labelled by "
       "its boundary; up and to the left is better. Hover a point for its values.</p>\n<div class=\"figures\">\n";
  h += chart("Agreement with the target's own prefill", "chart tradeoff", ttft_axis,
             axis("fraction agreeing", false, std::nullopt, 1.0, false), {t_agree, t_greedy}, 300);
  h += chart("Distance from the target's own logits (" + floor_note + ")", "chart tradeoff", ttft_axis,
             axis("distance", true, floor, std::nullopt, false), {t_err, t_kl}, 300);
  h += "</div>\n<h2>Against the recompute anchor</h2>\n<div class=\"figures\">\n";
  h += chart("Fidelity: logit distance (" + floor_note + ")", "chart", anchor_axis,
             axis("distance", true, floor, std::nullopt, false), fid, 280);
  h += chart("Fidelity: agreement", "chart", anchor_axis, axis("fraction agreeing", false, std::nullopt, 1.0, false),
             {agree, greedy}, 280);
  h += chart("Cost: time to first token", "chart", anchor_axis,
             axis("ratio to full target prefill", false, 0.0, std::nullopt, false), {cost, work}, 280);
  h += "</div>\n<h2>Table</h2>\n";
  html::Table t{{"config", "a", "agreement", "bit-identical", "mean rel. logit error", "max rel. logit error",
                 "mean KL (nats)", "max KL", "greedy prefix agreement", "greedy exact", "TTFT / full", "work saved"},
                {},
                {false, true, true, true, true, true, true, true, true, true, true, true},
                ""};
  if (tc.key != "ttft_ratio_vs_full_prefill") t.header.insert(t.header.begin() + 11, "TTFT incl. source / full");
  for (size_t i = 0; i < rows.size(); ++i) {
    const SweepRow& r = rows[i];
    std::string n = r.pure_mapping ? "pure mapping" : r.exact_hybrid ? "exact hybrid" : r.config;
    std::vector<std::string> row = {
        escape(n), r.config == "full-prefill" ? std::string("-") : std::to_string(r.a),
        std::to_string(r.agree) + "/" + std::to_string(r.comparisons), std::to_string(r.bit_identical),
        html::num(r.mean_rel_err, "%.3e"), html::num(r.max_rel_err, "%.3e"), html::num(r.mean_kl, "%.3e"),
        html::num(r.max_kl, "%.3e"), html::num(r.greedy_prefix_agreement, "%.3f"), std::to_string(r.greedy_exact),
        html::num(r.ttft_ratio, "%.3f"), html::num(100 * r.prefill_work_saved, "%.1f") + " %"};
    if (tc.key != "ttft_ratio_vs_full_prefill") row.insert(row.begin() + 11, html::num(ttft[i], "%.3f"));
    t.rows.push_back(std::move(row));
  }
  if (tc.key != "ttft_ratio_vs_full_prefill") t.numeric.push_back(true);
  h += html::table(t);
  if (full)
    h += "<p>Full target prefill: " + html::num(full->ttft_seconds * 1e3, "%.3f") +
         " ms summed over the evaluation prompts (the TTFT reference). " +
         (tc.key == "ttft_ratio_vs_full_prefill"
              ? std::string("The source's own prefill is not counted: the handoff starts from a cache the source "
                            "already holds.")
              : std::string("The plotted TTFT counts the source's prefill (column " + escape(tc.key) + ").")) +
         "</p>\n";
  // The TTFT protocol's three figures and the budget's choice (plotting them is the report's).
  h += "<h2>Time to first token, three ways</h2>\n<p>" + escape(protocol_ttft_note()) +
       "</p>\n<table><tr><th>config</th><th>a</th><th>TTFT / full (handoff + decode)</th>"
       "<th>+ source prefill / full</th><th>stored load / full</th><th>handed-over bytes</th></tr>\n";
  for (const SweepRow& r : rows) {
    std::string name = r.pure_mapping ? "pure mapping" : r.exact_hybrid ? "exact hybrid" : r.config;
    h += "<tr><td>" + escape(name) + "</td><td>" + (r.config == "full-prefill" ? std::string("-") : std::to_string(r.a)) +
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
    h += "<h2>Choice</h2>\n<p>Budget <code>" + escape(choice["budget"].get<std::string>()) + "</code> judged on " +
         escape(choice["judged_on"].get<std::string>()) + ": <b>" + escape(name) + "</b>. Held out: " +
         std::to_string(ho["agree"].get<int64_t>()) + "/" + std::to_string(ho["comparisons"].get<int64_t>()) +
         " next tokens agree, mean KL " + fmt("%.3e", ho["mean_kl"].get<double>()) + ", TTFT / full " +
         fmt("%.3f", ho["ttft_ratio_vs_full_prefill"].get<double>()) + " (with the source prefill " +
         fmt("%.3f", ho["ttft_with_source_ratio"].get<double>()) + "), work saved " +
         fmt("%.1f%%", 100 * ho["prefill_work_saved"].get<double>()) + ".</p>\n<p><b>" +
         escape(choice.value("verdict", "")) + "</b> (TTFT by " + escape(choice.value("ttft_case", "")) + ", " +
         escape(choice.value("timing", "")) + ".)</p>\n";
  }
  return h + html::page_end();
}

}  // namespace ember::map
