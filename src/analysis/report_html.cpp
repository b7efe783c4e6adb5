#include "analysis/report_html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "util/html_report.h"

namespace ember::analysis {

namespace {

using html::escape;

std::string num(double v) { return html::num(v, "%.9g"); }
std::string num_opt(const std::optional<double>& v) { return v ? num(*v) : "n/a"; }
std::string hex_bits(uint32_t x) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", x);
  return buf;
}

// The fixed scales (the same on every report, so two reports read alike): 1 - cosine from
// 1e-9 to 1 and MSE from 1e-12 to 1, log10; bit-identical heads get their own colour.
const html::ColourScale kCosineScale{1e-9, 1, true, "1 - cosine"};
const html::ColourScale kMseScale{1e-12, 1, true, "MSE"};

std::vector<std::string> ticks(const char* prefix, int n) {
  std::vector<std::string> t;
  for (int i = 0; i < n; ++i) t.push_back(prefix + std::to_string(i));
  return t;
}

// One layer x head heatmap of `metric` for `part`: rows are layers, columns KV heads.
std::string kv_heatmap(const KvMetrics& m, KvPart part, bool cosine) {
  const char* metric = cosine ? "cosine" : "mse";
  html::Heatmap h;
  h.caption = std::string(part == KvPart::k ? "K" : "V") + (cosine ? " cosine" : " MSE") + " per layer and KV head";
  h.svg_attrs = "data-part=\"" + std::string(part_name(part)) + "\" data-metric=\"" + metric + "\"";
  h.row_axis = "layer";
  h.col_axis = "KV head";
  h.row_ticks = ticks("", m.n_layers);
  h.col_ticks = ticks("", m.n_kv_heads);
  h.scale = cosine ? kCosineScale : kMseScale;
  for (int l = 0; l < m.n_layers; ++l) {
    for (int hd = 0; hd < m.n_kv_heads; ++hd) {
      const PartMetrics& pm = m.at(l, hd).part(part);
      const std::optional<double>& v = cosine ? pm.cosine : pm.mse;
      html::HeatCell c;
      c.exact = pm.mismatches == 0;
      if (v) c.value = cosine ? 1.0 - *v : *v;
      c.attrs = "data-layer=\"" + std::to_string(l) + "\" data-head=\"" + std::to_string(hd) + "\"";
      c.title = "layer " + std::to_string(l) + " head " + std::to_string(hd) + " " + part_name(part) + " " + metric +
                " = " + num_opt(v) + (c.exact ? " (bit-identical)" : "") + ", " + std::to_string(pm.mismatches) +
                "/" + std::to_string(pm.elements) + " f16 elements differ";
      h.cells.push_back(std::move(c));
    }
  }
  return html::heatmap(h);
}

// Attention-output cosine per (step, layer): rows are steps, columns layers.
std::string attn_heatmap(const Diagnostics& d) {
  const int n_layers = d.same_input.steps.empty() ? 0 : int(d.same_input.steps[0].attn_out.size());
  const int n_steps = int(d.same_input.steps.size());
  html::Heatmap h;
  h.caption = "Attention output after the O-projection, same input on both sides";
  h.svg_class = "attn-heatmap";
  h.cell_class = "attn-cell";
  h.row_axis = "decode step";
  h.col_axis = "layer";
  h.row_ticks = ticks("", n_steps);
  h.col_ticks = ticks("", n_layers);
  h.scale = kCosineScale;
  for (int s = 0; s < n_steps; ++s) {
    const SameInputStep& st = d.same_input.steps[size_t(s)];
    for (int l = 0; l < n_layers; ++l) {
      const VectorCompare& v = st.attn_out[size_t(l)];
      html::HeatCell c;
      c.exact = v.max_abs == 0;
      if (std::isfinite(v.cosine)) c.value = 1.0 - v.cosine;
      c.attrs = "data-step=\"" + std::to_string(s) + "\" data-layer=\"" + std::to_string(l) + "\"";
      c.title = "step " + std::to_string(s) + " layer " + std::to_string(l) + " attn-out cosine = " + num(v.cosine) +
                ", relative error = " + num_opt(v.rel_error) + (c.exact ? " (bit-identical)" : "");
      h.cells.push_back(std::move(c));
    }
  }
  return html::heatmap(h);
}

// The logits over the steps: 1 - cosine and KL(LEFT || RIGHT) on a log axis (identical
// logits, 0, drawn at the floor), the steps whose top-1 differs marked in red.
std::string logit_chart(const Diagnostics& d) {
  const double floor = 1e-12;
  html::Chart c;
  c.caption = "Next-token logits over the decode steps (0 = identical, drawn at 1e-12)";
  c.svg_class = "logit-chart";
  c.x = {"decode step", false, std::nullopt, std::nullopt, true};
  c.y = {"distance", true, std::nullopt, std::nullopt, false};
  const int n = int(d.same_input.steps.size());
  c.width = std::clamp(100 + 26 * n, 380, 760);
  html::Series cos{"1 - logit cosine", "#2b6cb0", {}, true, false};
  html::Series kl{"KL(LEFT || RIGHT), nats", "#805ad5", {}, true, true};
  html::Series differs{"top-1 differs", "#c53030", {}, false, false};
  double ymax = floor * 10, ymin = 1;
  bool at_floor = false;
  for (int s = 0; s < n; ++s) {
    const SameInputStep& st = d.same_input.steps[size_t(s)];
    const double gap = std::isfinite(st.logits.cosine) ? std::max(1.0 - st.logits.cosine, floor) : NAN;
    const std::string top1 = "top-1 " + std::to_string(st.top1_left) + "/" + std::to_string(st.top1_right);
    cos.points.push_back({double(s), gap, "", "step " + std::to_string(s) + ": logit cosine = " + num(st.logits.cosine) +
                              ", relative L2 = " + num_opt(st.logits.rel_error) + ", max abs = " + num(st.logits.max_abs) +
                              ", " + top1, ""});
    if (st.logits_kl)
      kl.points.push_back({double(s), std::max(*st.logits_kl, floor), "",
                           "step " + std::to_string(s) + ": KL = " + num(*st.logits_kl) + " nats", ""});
    if (st.top1_left != st.top1_right)
      differs.points.push_back({double(s), gap, "", "step " + std::to_string(s) + ": " + top1 + " (differs)", ""});
    for (const std::optional<double>& v : {std::optional<double>(gap), st.logits_kl})
      if (v && std::isfinite(*v)) {
        ymax = std::max(ymax, *v);
        ymin = std::min(ymin, std::max(*v, floor));
        at_floor = at_floor || *v <= floor;
      }
  }
  c.y.lo = at_floor ? floor : std::min(ymin, ymax);  // the floor only when something is drawn on it
  c.y.hi = ymax;
  c.series = {cos, kl};
  if (!differs.points.empty()) c.series.push_back(differs);
  return html::chart(c);
}

std::string tokens(const std::vector<int32_t>& t) {
  std::string o;
  for (size_t i = 0; i < t.size(); ++i) o += (i ? " " : "") + std::to_string(t[i]);
  return o;
}

std::string code(const std::string& s) { return "<code>" + escape(s) + "</code>"; }

}  // namespace

std::string report_html(const CompareReport& r, const html::Stamp& stamp) {
  std::string o = html::page_begin("ember kv compare", stamp);
  html::Table ids{{"", "kind", "model", "arch, weights", "snapshot", "resume token", "cache K / V"}, {}, {false, false, false, false, false, true, false}, ""};
  for (const auto* s : {&r.left, &r.right}) {
    const auto [ck, cv] = side_cache_types(*s, s == &r.right && r.perturbation ? &*r.perturbation : nullptr);
    ids.rows.push_back({s == &r.left ? "LEFT (reference)" : "RIGHT", escape(s->identity.kind),
                        code(s->identity.model_identity), escape(s->identity.architecture + ", " + s->identity.weights),
                        code(s->identity.snapshot_id.empty() ? "-" : s->identity.snapshot_id),
                        std::to_string(s->resume_token), escape(ck + " / " + cv)});
  }
  o += html::table(ids);
  o += "<p>Aligned: " + std::to_string(r.coords.n_layers) + " layers, " + std::to_string(r.coords.n_kv_heads) +
       " KV heads, head dim " + std::to_string(r.coords.head_dim) + ", " + std::to_string(r.coords.n_pos) +
       " prefix positions.</p>\n<p class=\"crossing\">" + escape(r.crossing.statement) + "</p>\n";
  if (r.perturbation) {
    const PerturbReceipt& p = *r.perturbation;
    o += "<p>RIGHT is LEFT's source perturbed in memory by receipt " + code(r.perturbation_receipt_sha256) + ": " +
         (p.spec.quantize ? escape(describe_operation(p.spec))
                          : (p.spec.zero ? std::string("zero") : "scale by f32 bits " + hex_bits(p.spec.scale_bits)) +
                                " of layer " + std::to_string(p.spec.layer) + ", head " + std::to_string(p.spec.head) +
                                ", part " + perturb_part_name(p.spec.part)) +
         ".</p>\n";
  }
  if (r.options.thresholds.any()) {
    o += r.pass() ? "<p class=\"pass\">PASS: every metric within its threshold.</p>\n"
                  : "<p class=\"fail\">FAIL: " + std::to_string(r.failures.size()) + " exceedance(s); first at layer " +
                        std::to_string(r.failures[0].layer) + ", head " + std::to_string(r.failures[0].head) + ", " +
                        part_name(r.failures[0].part) + " " + escape(r.failures[0].metric) + ".</p>\n";
  }
  o += "<h2>K/V per layer and KV head</h2>\n<p class=\"muted\">Colour: green = bit-identical head; light "
       "yellow to dark red = distance on a log scale (legend under each map); dark grey = not computable. "
       "Hover a cell for its exact value.</p>\n<div class=\"figures\">\n";
  o += kv_heatmap(r.metrics, KvPart::k, true);
  o += kv_heatmap(r.metrics, KvPart::v, true);
  o += kv_heatmap(r.metrics, KvPart::k, false);
  o += kv_heatmap(r.metrics, KvPart::v, false);
  o += "</div>\n";
  if (r.diagnostics) {
    const Diagnostics& d = *r.diagnostics;
    o += "<h2>Same-input diagnostics (LEFT's reference-greedy path)</h2>\n<p>KL(LEFT || RIGHT) of the next-token "
         "distribution: mean " + num_opt(d.same_input.mean_kl) + ", max " + num_opt(d.same_input.max_kl) +
         " nats. Top-1 agreement: " + std::to_string(d.same_input.top1_agreement) + "/" +
         std::to_string(d.same_input.steps.size()) + "; first disagreement: " +
         (d.same_input.first_disagreement ? "step " + std::to_string(*d.same_input.first_disagreement)
                                          : std::string("none")) +
         ".</p>\n<div class=\"figures\">\n";
    o += attn_heatmap(d);
    o += logit_chart(d);
    o += "</div>\n";
    o += "<h2>Independent greedy</h2>\n";
    o += html::table({{"side", "tokens"}, {{"LEFT", code(tokens(d.greedy.left))}, {"RIGHT", code(tokens(d.greedy.right))}}, {}, ""});
    o += "<p>" +
         (d.greedy.identical() ? std::string("Identical sequences.")
                               : "First divergence at token " + std::to_string(*d.greedy.first_divergence) +
                                     "; agreeing prefix " + std::to_string(d.greedy.agreeing_prefix) + ".") +
         "</p>\n";
  }
  return o + html::page_end();
}

}  // namespace ember::analysis
