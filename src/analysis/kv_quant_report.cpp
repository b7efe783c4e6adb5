// The HTML page of `ember study kv-quant --html`: the summary table, then one heatmap per
// configuration of the per-(layer, KV head) relative K and V error. Self-contained: no
// network, no scripts, inline SVG only (the compare report's conventions and colours).
#include <cstdio>

#include "analysis/kv_quant_study.h"
#include "analysis/report_html.h"

namespace ember::kv {

namespace {

std::string num(double v, const char* f = "%.3e") {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// Relative error 1e-5 .. 1 on a log scale.
std::string error_map(const KvQuantStudy& s, const KvQuantConfig& c, bool keys) {
  const std::vector<double>& e = keys ? c.k_rel_err : c.v_rel_err;
  const int cell = 16, left = 54, top = 20;
  const int w = left + s.n_kv_heads * cell + 10, h = top + s.n_layers * cell + 10;
  std::string o = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(w) +
                  "\" height=\"" + std::to_string(h) + "\" role=\"img\"><text x=\"0\" y=\"12\">" +
                  (keys ? "K" : "V") + " rel. error</text>\n";
  for (int l = 0; l < s.n_layers; ++l) {
    o += "<text x=\"0\" y=\"" + std::to_string(top + l * cell + 12) + "\">L" + std::to_string(l) +
         "</text>\n";
    for (int hd = 0; hd < s.n_kv_heads; ++hd) {
      const double v = e[size_t(l) * s.n_kv_heads + hd];
      const std::string colour = v == 0 ? "#e8f1e8" : heat_colour(log_scale_position(v, -5, 0));
      o += "<rect x=\"" + std::to_string(left + hd * cell) + "\" y=\"" +
           std::to_string(top + l * cell) + "\" width=\"" + std::to_string(cell - 1) +
           "\" height=\"" + std::to_string(cell - 1) + "\" fill=\"" + colour + "\"><title>layer " +
           std::to_string(l) + " head " + std::to_string(hd) + ": " + num(v) + "</title></rect>\n";
    }
  }
  return o + "</svg>\n";
}

}  // namespace

std::string KvQuantStudy::html() const {
  std::string h =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>ember kv-quant "
      "study</title><style>body{font-family:sans-serif;margin:2em;max-width:1100px}"
      "table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:3px 8px;text-align:right}"
      "th{background:#eee}figure{display:inline-block;margin:0 1em 1em 0}</style></head><body>\n"
      "<h1>What llama.cpp's quantized KV caches cost</h1>\n";
  h += "<p>Model <code>" + html_escape(model_path) + "</code> (identity " +
       html_escape(model_identity.substr(0, 16)) + "&hellip;), prompts <code>" +
       html_escape(prompts_path) + "</code>: " + std::to_string(prompts) + " used, " +
       std::to_string(skipped) + " too short; " + std::to_string(steps) +
       " next-token distributions per configuration (continuation " +
       std::to_string(options.continuation) + ", top-" + std::to_string(options.top_k) +
       ", rotation " + kv_rotation_name(options.rotation) + "). KL = KL(native || quantized) in nats; dNLL of the reference token; relative error "
       "of the prefix K/V.</p>\n";
  h += "<table><tr><th>type</th><th>part</th><th>KL mean</th><th>KL p99</th><th>KL max</th>"
       "<th>top-1 agreement</th><th>top-k overlap</th><th>dNLL</th><th>K rel. error</th>"
       "<th>V rel. error</th></tr>\n";
  for (const KvQuantConfig& c : configs) {
    h += "<tr><td>" + gguf::type_name(uint32_t(c.type)) + "</td><td>" + perturb_part_name(c.part) +
         "</td><td>" + num(c.kl_mean) + "</td><td>" + num(c.kl_p99) + "</td><td>" + num(c.kl_max) +
         "</td><td>" + num(steps ? double(c.top1_agree) / double(steps) : 0.0, "%.4f") +
         "</td><td>" + num(c.topk_overlap, "%.4f") + "</td><td>" + num(c.dnll) + "</td><td>" +
         num(c.k_rel_err_mean) + "</td><td>" + num(c.v_rel_err_mean) + "</td></tr>\n";
  }
  h += "</table>\n<h2>Per layer and KV head (relative error, 1e-5 to 1 on a log scale)</h2>\n";
  for (const KvQuantConfig& c : configs) {
    if (c.part != PerturbPart::kv) continue;  // K and V of the k / v rows are the same maps
    h += "<figure><figcaption>" + gguf::type_name(uint32_t(c.type)) + "</figcaption>\n" +
         error_map(*this, c, true) + error_map(*this, c, false) + "</figure>\n";
  }
  return h + "</body></html>\n";
}

}  // namespace ember::kv
