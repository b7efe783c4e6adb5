// The HTML page of `ember study kv-quant --html`: the summary table, then one pair of heatmaps
// per type of the per-(layer, KV head) relative K and V error. Self-contained: no network, no
// scripts, inline SVG only, drawn with util/html_report.h like every ember report.
#include <algorithm>

#include "analysis/kv_quant_study.h"
#include "util/html_report.h"

namespace ember::analysis {

namespace {

std::string num(double v, const char* f = "%.3e") { return html::num(v, f); }

// Relative error 1e-5 .. 1 on a log scale; an unquantized part (error 0) is bit-identical.
std::string error_map(const KvQuantStudy& s, const KvQuantConfig& c, bool keys) {
  const std::vector<double>& e = keys ? c.k_rel_err : c.v_rel_err;
  html::Heatmap h;
  h.caption = gguf::type_name(uint32_t(c.type)) + (keys ? ": K" : ": V") + " relative error";
  h.svg_attrs = "data-type=\"" + html::escape(gguf::type_name(uint32_t(c.type))) + "\" data-part=\"" +
                (keys ? "k" : "v") + "\"";
  h.row_axis = "layer";
  h.col_axis = "KV head";
  for (int l = 0; l < s.n_layers; ++l) h.row_ticks.push_back(std::to_string(l));
  for (int hd = 0; hd < s.n_kv_heads; ++hd) h.col_ticks.push_back(std::to_string(hd));
  h.scale = {1e-5, 1, true, "||q - x|| / ||x||"};
  for (int l = 0; l < s.n_layers; ++l) {
    for (int hd = 0; hd < s.n_kv_heads; ++hd) {
      const size_t i = size_t(l) * size_t(s.n_kv_heads) + size_t(hd);
      html::HeatCell cell;
      if (i < e.size()) cell.value = e[i];
      cell.exact = i < e.size() && e[i] == 0;
      cell.attrs = "data-layer=\"" + std::to_string(l) + "\" data-head=\"" + std::to_string(hd) + "\"";
      cell.title = "layer " + std::to_string(l) + " head " + std::to_string(hd) + " " + (keys ? "K" : "V") +
                   " relative error = " + (cell.value ? num(*cell.value) : std::string("n/a"));
      h.cells.push_back(std::move(cell));
    }
  }
  return html::heatmap(h);
}

// KL of each (layer, KV head) quantized alone, 1e-6 .. 10 nats on a log scale (0: exact).
std::string kl_map(const KvQuantStudy& s, const KvQuantConfig& c) {
  html::Heatmap h;
  const std::string type = gguf::type_name(uint32_t(c.type));
  h.caption = type + " K+V, one (layer, KV head) at a time: KL mean (nats)";
  h.svg_attrs = "data-type=\"" + html::escape(type) + "\" data-kl-map=\"1\"";
  h.row_axis = "layer";
  h.col_axis = "KV head";
  for (int l = 0; l < s.n_layers; ++l) h.row_ticks.push_back(std::to_string(l));
  for (int hd = 0; hd < s.n_kv_heads; ++hd) h.col_ticks.push_back(std::to_string(hd));
  h.scale = {1e-6, 10, true, "KL(native || quantized), nats"};
  for (int l = 0; l < s.n_layers; ++l)
    for (int hd = 0; hd < s.n_kv_heads; ++hd) {
      const KvQuantFigures& f = c.per_layer_head[size_t(l) * size_t(s.n_kv_heads) + size_t(hd)];
      html::HeatCell cell;
      cell.value = f.kl_mean;
      cell.exact = f.kl_mean == 0;
      cell.attrs = "data-layer=\"" + std::to_string(l) + "\" data-head=\"" + std::to_string(hd) + "\"";
      cell.title = "layer " + std::to_string(l) + " head " + std::to_string(hd) + " " + type + " K+V: KL mean " +
                   num(f.kl_mean) + ", top-1 " + num(f.top1, "%.4f") + ", dNLL " + num(f.dnll);
      h.cells.push_back(std::move(cell));
    }
  return html::heatmap(h);
}

// KL mean against bits per value, one point per (K type, V type) pair of the study.
std::string kl_bytes_chart(const KvQuantStudy& s) {
  html::Chart ch;
  ch.caption = "KL mean against the cache's bits per value (K and V of every layer), per K/V type pair";
  ch.x = {"bits per value (llama.cpp cache)", false, {}, {}, false};
  ch.y = {"KL mean, nats (log; 0 drawn at 1e-9)", true, {}, {}, false};
  const char* colours[] = {"#1f77b4", "#d62728", "#2ca02c"};
  for (PerturbPart part : {PerturbPart::k, PerturbPart::v, PerturbPart::kv}) {
    html::Series se;
    se.name = part == PerturbPart::k ? "K quantized, V f16" : part == PerturbPart::v ? "K f16, V quantized" : "K and V";
    se.colour = colours[int(part)];
    se.line = false;
    for (const KvQuantConfig& c : s.configs) {
      if (c.part != part) continue;
      html::ChartPoint p;
      p.x = c.bits_per_value;
      p.y = std::max(c.kl_mean, 1e-9);
      p.label = gguf::type_name(uint32_t(c.type));
      p.title = se.name + " " + p.label + ": " + num(c.bits_per_value, "%.3f") + " bits per value, KL mean " +
                num(c.kl_mean);
      se.points.push_back(p);
    }
    if (!se.points.empty()) ch.series.push_back(se);
  }
  return html::chart(ch);
}

}  // namespace

std::string KvQuantStudy::html(const html::Stamp& stamp) const {
  std::string h = html::page_begin("What llama.cpp's quantized KV caches cost", stamp);
  h += std::string("<p><strong>Mode ") + kv_quant_mode_name(options.mode) + "</strong>: " +
       (options.mode == KvQuantMode::in_loop
            ? "every K/V row quantized as the engine writes it, over the whole prompt, as llama.cpp does."
            : "prefix only: a finished native prefix quantized once; not what llama.cpp runs.") + "</p>\n";
  h += "<p>Model <code>" + html::escape(model_path) + "</code> (identity <code>" +
       html::escape(model_identity.substr(0, 16)) + "&hellip;</code>), prompts <code>" + html::escape(prompts_path) +
       "</code>: " + std::to_string(prompts) + " used, " + std::to_string(skipped) + " too short; " +
       std::to_string(steps) + " next-token distributions per configuration (continuation " +
       std::to_string(options.continuation) + ", top-" + std::to_string(options.top_k) +
       ", rotation " + kv_rotation_name(options.rotation) + "). KL = KL(native || quantized) in nats; dNLL of the reference token; relative error of the prefix "
       "K/V.</p>\n";
  html::Table t{{"type", "part", "bits/value", "KL mean", "KL p99", "KL max", "top-1 agreement", "top-k overlap", "dNLL",
                 "K rel. error", "V rel. error"},
                {},
                {false, false, true, true, true, true, true, true, true, true, true},
                ""};
  for (const KvQuantConfig& c : configs)
    t.rows.push_back({html::escape(gguf::type_name(uint32_t(c.type))), perturb_part_name(c.part), num(c.bits_per_value, "%.3f"), num(c.kl_mean),
                      num(c.kl_p99), num(c.kl_max), num(steps ? double(c.top1_agree) / double(steps) : 0.0, "%.4f"),
                      num(c.topk_overlap, "%.4f"), num(c.dnll), num(c.k_rel_err_mean), num(c.v_rel_err_mean)});
  h += html::table(t);
  h += "<h2>KL against bytes</h2>\n" + kl_bytes_chart(*this);
  bool maps = false;
  for (const KvQuantConfig& c : configs) maps = maps || !c.per_layer_head.empty();
  if (maps) {
    h += "<h2>Per layer and KV head: KL with only that group quantized</h2>\n<p class=\"muted\">Mode " +
         std::string(kv_quant_mode_name(options.mode)) +
         ". Each cell: K and V of one KV head of one layer quantized, every other value exact. Hover a cell "
         "for KL, top-1 and dNLL.</p>\n<div class=\"figures\">\n";
    for (const KvQuantConfig& c : configs)
      if (!c.per_layer_head.empty()) h += kl_map(*this, c);
    h += "</div>\n";
  }
  h += "<h2>Per layer and KV head: relative error of the prefix K and V</h2>\n<p class=\"muted\">One pair of maps "
       "per type (K+V rows; the K-only and V-only rows have the same maps). Hover a cell for its value.</p>\n"
       "<div class=\"figures\">\n";
  for (const KvQuantConfig& c : configs) {
    if (c.part != PerturbPart::kv) continue;
    h += error_map(*this, c, true) + error_map(*this, c, false);
  }
  return h + "</div>\n" + html::page_end();
}

}  // namespace ember::analysis
