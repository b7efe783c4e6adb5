// The HTML page of `ember study kv-quant --html`: the summary table, then one pair of heatmaps
// per type of the per-(layer, KV head) relative K and V error. Self-contained: no network, no
// scripts, inline SVG only, drawn with util/html_report.h like every ember report.
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

}  // namespace

std::string KvQuantStudy::html(const html::Stamp& stamp) const {
  std::string h = html::page_begin("What llama.cpp's quantized KV caches cost", stamp);
  h += "<p>Model <code>" + html::escape(model_path) + "</code> (identity <code>" +
       html::escape(model_identity.substr(0, 16)) + "&hellip;</code>), prompts <code>" + html::escape(prompts_path) +
       "</code>: " + std::to_string(prompts) + " used, " + std::to_string(skipped) + " too short; " +
       std::to_string(steps) + " next-token distributions per configuration (continuation " +
       std::to_string(options.continuation) + ", top-" + std::to_string(options.top_k) +
       ", rotation " + kv_rotation_name(options.rotation) + "). KL = KL(native || quantized) in nats; dNLL of the reference token; relative error of the prefix "
       "K/V.</p>\n";
  html::Table t{{"type", "part", "KL mean", "KL p99", "KL max", "top-1 agreement", "top-k overlap", "dNLL",
                 "K rel. error", "V rel. error"},
                {},
                {false, false, true, true, true, true, true, true, true, true},
                ""};
  for (const KvQuantConfig& c : configs)
    t.rows.push_back({html::escape(gguf::type_name(uint32_t(c.type))), perturb_part_name(c.part), num(c.kl_mean),
                      num(c.kl_p99), num(c.kl_max), num(steps ? double(c.top1_agree) / double(steps) : 0.0, "%.4f"),
                      num(c.topk_overlap, "%.4f"), num(c.dnll), num(c.k_rel_err_mean), num(c.v_rel_err_mean)});
  h += html::table(t);
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
