#include "analysis/report_html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ember::kv {

namespace {

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&#39;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string num(double v, const char* f = "%.9g") {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}
std::string num_opt(const std::optional<double>& v) { return v ? num(*v) : "n/a"; }
std::string hex_bits(uint32_t x) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", x);
  return buf;
}

// A distance in [0, 1] -> colour: 0 (near) pale yellow to 1 (far) dark red. Distances come
// from log10 scales so that 1e-8 and 1e-2 differences are both visible.
std::string heat(double t) {
  t = std::clamp(t, 0.0, 1.0);
  const int r = int(std::lround(255 - 120 * t));
  const int g = int(std::lround(240 - 230 * t));
  const int b = int(std::lround(160 - 150 * t));
  char buf[16];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", r, g, b);
  return buf;
}
constexpr const char* kExact = "#e8f1e8";    // bit-identical
constexpr const char* kMissing = "#202020";  // metric absent (non-finite or undefined)

// log10 position of x in [10^lo, 10^hi] as [0, 1].
double log_pos(double x, double lo, double hi) {
  if (x <= 0) return 0;
  return (std::log10(x) - lo) / (hi - lo);
}

std::string cosine_colour(const std::optional<double>& cos, bool exact) {
  if (exact) return kExact;
  if (!cos) return kMissing;
  return heat(log_pos(1.0 - *cos, -9, 0) * 0.9 + 0.1);  // any difference is visibly tinted
}
std::string mse_colour(const std::optional<double>& mse, bool exact) {
  if (exact) return kExact;
  if (!mse) return kMissing;
  return heat(log_pos(*mse, -12, 0) * 0.9 + 0.1);
}

constexpr int kCell = 22, kLeft = 64, kTop = 34;

// One layer x head heatmap of `metric` for `part`: rows are layers, columns KV heads.
std::string kv_heatmap(const KvMetrics& m, KvPart part, bool cosine) {
  const char* metric = cosine ? "cosine" : "mse";
  const int w = kLeft + m.n_kv_heads * kCell + 10, h = kTop + m.n_layers * kCell + 10;
  std::string o = "<figure><figcaption>" + std::string(part == KvPart::k ? "K" : "V") + " " +
                  metric + " (rows: layers, columns: KV heads)</figcaption>\n";
  o += "<svg class=\"heatmap\" data-part=\"" + std::string(part_name(part)) +
       "\" data-metric=\"" + metric + "\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
       std::to_string(w) + "\" height=\"" + std::to_string(h) + "\" role=\"img\">\n";
  for (int hd = 0; hd < m.n_kv_heads; ++hd) {
    o += "<text x=\"" + std::to_string(kLeft + hd * kCell + kCell / 2) + "\" y=\"" +
         std::to_string(kTop - 8) + "\" text-anchor=\"middle\">h" + std::to_string(hd) +
         "</text>\n";
  }
  for (int l = 0; l < m.n_layers; ++l) {
    o += "<text x=\"" + std::to_string(kLeft - 6) + "\" y=\"" +
         std::to_string(kTop + l * kCell + kCell / 2 + 4) + "\" text-anchor=\"end\">L" +
         std::to_string(l) + "</text>\n";
    for (int hd = 0; hd < m.n_kv_heads; ++hd) {
      const PartMetrics& pm = m.at(l, hd).part(part);
      const bool exact = pm.mismatches == 0;
      const std::optional<double>& v = cosine ? pm.cosine : pm.mse;
      const std::string fill = cosine ? cosine_colour(v, exact) : mse_colour(v, exact);
      o += "<rect class=\"cell\" data-layer=\"" + std::to_string(l) + "\" data-head=\"" +
           std::to_string(hd) + "\" x=\"" + std::to_string(kLeft + hd * kCell) + "\" y=\"" +
           std::to_string(kTop + l * kCell) + "\" width=\"" + std::to_string(kCell - 2) +
           "\" height=\"" + std::to_string(kCell - 2) + "\" fill=\"" + fill + "\"><title>layer " +
           std::to_string(l) + " head " + std::to_string(hd) + " " + part_name(part) + " " +
           metric + " = " + num_opt(v) + (exact ? " (bit-identical)" : "") + ", " +
           std::to_string(pm.mismatches) + "/" + std::to_string(pm.elements) +
           " f16 elements differ</title></rect>\n";
    }
  }
  o += "</svg></figure>\n";
  return o;
}

// Attention-output cosine per (step, layer): rows are steps, columns layers.
std::string attn_heatmap(const Diagnostics& d) {
  const int n_layers = d.same_input.steps.empty() ? 0 : int(d.same_input.steps[0].attn_out.size());
  const int n_steps = int(d.same_input.steps.size());
  const int w = kLeft + n_layers * kCell + 10, h = kTop + n_steps * kCell + 10;
  std::string o = "<figure><figcaption>Attention output after the O-projection: cosine per "
                  "step (rows) and layer (columns), same input on both sides</figcaption>\n";
  o += "<svg class=\"attn-heatmap\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
       std::to_string(w) + "\" height=\"" + std::to_string(h) + "\" role=\"img\">\n";
  for (int l = 0; l < n_layers; ++l) {
    o += "<text x=\"" + std::to_string(kLeft + l * kCell + kCell / 2) + "\" y=\"" +
         std::to_string(kTop - 8) + "\" text-anchor=\"middle\">L" + std::to_string(l) + "</text>\n";
  }
  for (int s = 0; s < n_steps; ++s) {
    const SameInputStep& st = d.same_input.steps[size_t(s)];
    o += "<text x=\"" + std::to_string(kLeft - 6) + "\" y=\"" +
         std::to_string(kTop + s * kCell + kCell / 2 + 4) + "\" text-anchor=\"end\">s" +
         std::to_string(s) + "</text>\n";
    for (int l = 0; l < n_layers; ++l) {
      const VectorCompare& v = st.attn_out[size_t(l)];
      const bool exact = v.max_abs == 0;
      o += "<rect class=\"attn-cell\" data-step=\"" + std::to_string(s) + "\" data-layer=\"" +
           std::to_string(l) + "\" x=\"" + std::to_string(kLeft + l * kCell) + "\" y=\"" +
           std::to_string(kTop + s * kCell) + "\" width=\"" + std::to_string(kCell - 2) +
           "\" height=\"" + std::to_string(kCell - 2) + "\" fill=\"" +
           cosine_colour(v.cosine, exact) + "\"><title>step " + std::to_string(s) + " layer " +
           std::to_string(l) + " attn-out cosine = " + num(v.cosine) + ", relative error = " +
           num_opt(v.rel_error) + "</title></rect>\n";
    }
  }
  o += "</svg></figure>\n";
  return o;
}

// Logit agreement over steps: bars of -log10(1 - cosine) (taller = closer, capped at 16
// for identical logits) and a dot per step, green when top-1 agrees, red when not.
std::string logit_chart(const Diagnostics& d) {
  const int n = int(d.same_input.steps.size());
  const int step_w = 28, plot_h = 160, w = kLeft + n * step_w + 20, h = plot_h + 70;
  std::string o = "<figure><figcaption>Logits over the steps: bar height = -log10(1 - cosine) "
                  "(16 = identical); dot green = top-1 agrees, red = differs</figcaption>\n";
  o += "<svg class=\"logit-chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
       std::to_string(w) + "\" height=\"" + std::to_string(h) + "\" role=\"img\">\n";
  o += "<line x1=\"" + std::to_string(kLeft) + "\" y1=\"" + std::to_string(20 + plot_h) +
       "\" x2=\"" + std::to_string(w - 10) + "\" y2=\"" + std::to_string(20 + plot_h) +
       "\" stroke=\"#444\"/>\n";
  for (int s = 0; s < n; ++s) {
    const SameInputStep& st = d.same_input.steps[size_t(s)];
    const double gap = 1.0 - st.logits.cosine;
    const double score = gap <= 0 ? 16.0 : std::clamp(-std::log10(gap), 0.0, 16.0);
    const int bar = int(std::lround(score / 16.0 * plot_h));
    const int x = kLeft + s * step_w;
    const bool agree = st.top1_left == st.top1_right;
    o += "<rect class=\"logit-bar\" data-step=\"" + std::to_string(s) + "\" x=\"" +
         std::to_string(x + 4) + "\" y=\"" + std::to_string(20 + plot_h - bar) +
         "\" width=\"" + std::to_string(step_w - 8) + "\" height=\"" + std::to_string(bar) +
         "\" fill=\"#5b7db1\"><title>step " + std::to_string(s) + " logit cosine = " +
         num(st.logits.cosine) + ", relative L2 = " + num_opt(st.logits.rel_error) +
         ", max abs = " + num(st.logits.max_abs) + ", KL = " + num_opt(st.logits_kl) +
         ", top-1 " + std::to_string(st.top1_left) +
         "/" + std::to_string(st.top1_right) + "</title></rect>\n";
    o += "<circle class=\"top1\" data-agree=\"" + std::string(agree ? "1" : "0") + "\" cx=\"" +
         std::to_string(x + step_w / 2) + "\" cy=\"" + std::to_string(plot_h + 38) +
         "\" r=\"6\" fill=\"" + (agree ? "#2e8b57" : "#c0392b") + "\"/>\n";
    o += "<text x=\"" + std::to_string(x + step_w / 2) + "\" y=\"" + std::to_string(plot_h + 60) +
         "\" text-anchor=\"middle\">" + std::to_string(s) + "</text>\n";
  }
  o += "</svg></figure>\n";
  return o;
}

std::string tokens(const std::vector<int32_t>& t) {
  std::string o;
  for (size_t i = 0; i < t.size(); ++i) o += (i ? " " : "") + std::to_string(t[i]);
  return o;
}

}  // namespace

std::string html_escape(const std::string& s) { return esc(s); }
std::string heat_colour(double t) { return heat(t); }
double log_scale_position(double x, double lo, double hi) { return log_pos(x, lo, hi); }

std::string report_html(const CompareReport& r) {
  std::string o =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<title>ember kv compare</title>\n<style>\n"
      "body{font-family:sans-serif;margin:24px;color:#222}"
      "figure{display:inline-block;margin:8px 24px 8px 0;vertical-align:top}"
      "figcaption{font-size:13px;margin-bottom:4px}svg text{font-size:11px}"
      "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:2px 6px}"
      ".fail{color:#c0392b;font-weight:bold}.pass{color:#2e8b57;font-weight:bold}"
      "code{font-size:12px}\n</style>\n</head>\n<body>\n<h1>ember kv compare</h1>\n";
  o += "<table>\n<tr><th></th><th>kind</th><th>model</th><th>arch, weights</th>"
       "<th>snapshot</th><th>resume token</th></tr>\n";
  for (const auto* s : {&r.left, &r.right}) {
    o += "<tr><td>" + std::string(s == &r.left ? "LEFT (reference)" : "RIGHT") + "</td><td>" +
         esc(s->identity.kind) + "</td><td><code>" + esc(s->identity.model_identity) +
         "</code></td><td>" + esc(s->identity.architecture + ", " + s->identity.weights) +
         "</td><td><code>" + esc(s->identity.snapshot_id.empty() ? "-" : s->identity.snapshot_id) +
         "</code></td><td>" + std::to_string(s->resume_token) + "</td></tr>\n";
  }
  o += "</table>\n<p>Aligned: " + std::to_string(r.coords.n_layers) + " layers, " +
       std::to_string(r.coords.n_kv_heads) + " KV heads, head dim " +
       std::to_string(r.coords.head_dim) + ", " + std::to_string(r.coords.n_pos) +
       " prefix positions.</p>\n<p class=\"crossing\">" + esc(r.crossing.statement) + "</p>\n";
  if (r.perturbation) {
    const PerturbReceipt& p = *r.perturbation;
    o += "<p>RIGHT is LEFT's source perturbed in memory by receipt <code>" +
         esc(r.perturbation_receipt_sha256) + "</code>: " +
         (p.spec.quantize ? esc(describe_operation(p.spec))
                          : (p.spec.zero ? std::string("zero") : "scale by f32 bits " + hex_bits(p.spec.scale_bits)) +
                                " of layer " + std::to_string(p.spec.layer) + ", head " +
                                std::to_string(p.spec.head) + ", part " + perturb_part_name(p.spec.part)) +
         ".</p>\n";
  }
  if (r.options.thresholds.any()) {
    o += r.pass() ? "<p class=\"pass\">PASS: every metric within its threshold.</p>\n"
                  : "<p class=\"fail\">FAIL: " + std::to_string(r.failures.size()) +
                        " exceedance(s); first at layer " + std::to_string(r.failures[0].layer) +
                        ", head " + std::to_string(r.failures[0].head) + ", " +
                        part_name(r.failures[0].part) + " " + esc(r.failures[0].metric) + ".</p>\n";
  }
  o += "<p>Cell colour: pale green = bit-identical; yellow to dark red = log-scaled distance "
       "(1 - cosine from 1e-9 to 1, MSE from 1e-12 to 1); black = not computable.</p>\n";
  o += "<h2>K/V per layer and KV head</h2>\n<div>\n";
  o += kv_heatmap(r.metrics, KvPart::k, true);
  o += kv_heatmap(r.metrics, KvPart::v, true);
  o += "</div>\n<div>\n";
  o += kv_heatmap(r.metrics, KvPart::k, false);
  o += kv_heatmap(r.metrics, KvPart::v, false);
  o += "</div>\n";
  if (r.diagnostics) {
    const Diagnostics& d = *r.diagnostics;
    o += "<h2>Same-input diagnostics (LEFT's reference-greedy path)</h2>\n<div>\n";
    o += attn_heatmap(d);
    o += logit_chart(d);
    o += "</div>\n<p>KL(LEFT || RIGHT) of the next-token distribution: mean " +
         num_opt(d.same_input.mean_kl) + ", max " + num_opt(d.same_input.max_kl) +
         " nats.</p>\n<p>Top-1 agreement: " + std::to_string(d.same_input.top1_agreement) + "/" +
         std::to_string(d.same_input.steps.size()) + "; first disagreement: " +
         (d.same_input.first_disagreement ? "step " + std::to_string(*d.same_input.first_disagreement)
                                          : std::string("none")) + ".</p>\n";
    o += "<h2>Independent greedy</h2>\n<table>\n<tr><td>LEFT</td><td><code>" +
         tokens(d.greedy.left) + "</code></td></tr>\n<tr><td>RIGHT</td><td><code>" +
         tokens(d.greedy.right) + "</code></td></tr>\n</table>\n<p>" +
         (d.greedy.identical() ? std::string("Identical sequences.")
                               : "First divergence at token " +
                                     std::to_string(*d.greedy.first_divergence) + "; agreeing prefix " +
                                     std::to_string(d.greedy.agreeing_prefix) + ".") +
         "</p>\n";
  }
  o += "</body>\n</html>\n";
  return o;
}

}  // namespace ember::kv
