// The three renderings of a kv matrix run (docs/matrix.md): the text table, the
// ember.kv-matrix.v1 JSON and the self-contained HTML page.
#include <cstdio>

#include "analysis/matrix.h"
#include "kv/strict_json.h"

#include "util/html_report.h"

// The page's escaping and its failure colour come from the shared report primitives.
namespace ember::analysis {
namespace {
std::string html_escape(const std::string& s) { return html::escape(s); }
std::string far_colour() { return html::ColourScale{}.colour(1.0); }
}  // namespace
}  // namespace ember::analysis

namespace ember::analysis {

namespace {

using kv::ordered_json;

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string roles(const std::array<int, 3>& t) {
  return std::to_string(t[0]) + "/" + std::to_string(t[1]) + "/" + std::to_string(t[2]);
}
std::string roles(const std::array<std::string, 3>& s) { return s[0] + "/" + s[1] + "/" + s[2]; }

bool ran(const MatrixCell& c) { return c.status == "pass" || c.status == "fail"; }

std::string gate_text(const MatrixCell& c) {
  if (!ran(c)) return "-";
  const kv::GateVerdict& v = c.gate.verdict;
  if (c.gate.pass) return "pass " + std::to_string(v.rows) + "x" + std::to_string(v.vocab);
  return "FAIL " + std::to_string(v.differing_values) + " differ";
}

std::string self_text(const MatrixCell& c) {
  if (!ran(c)) return "-";
  return c.self.exact ? "exact" : "FAIL " + std::to_string(c.self.mismatches);
}

std::string control_text(const MatrixCell& c) {
  if (!ran(c)) return "-";
  return std::string(c.control.detected ? "detected" : "MISSED") + " |dlogit| " +
         fmt("%.2e", c.control.logits_max_abs);
}

std::string pad(const std::string& s, size_t w) {
  // Width by code points, so an Arabic prompt id does not shift the columns.
  size_t n = 0;
  for (unsigned char ch : s) n += (ch & 0xc0) != 0x80;
  return n >= w ? s + " " : s + std::string(w - n + 1, ' ');
}

ordered_json cell_json(const MatrixCell& c) {
  ordered_json j;
  j["model"] = c.model_path;
  j["model_name"] = c.model_name;
  j["architecture"] = c.architecture;
  j["weights"] = c.weights;
  j["model_identity"] = c.model_identity;
  j["prompt"] = c.prompt_id;
  j["prompt_tokens"] = c.prompt_tokens;
  j["variant"] = c.variant;
  j["threads"] = {{"native", c.threads[0]}, {"export", c.threads[1]}, {"replay", c.threads[2]}};
  j["simd"] = {{"native", c.simd[0]}, {"export", c.simd[1]}, {"replay", c.simd[2]}};
  j["status"] = c.status;
  j["reason"] = c.reason;
  if (ran(c)) {
    ordered_json g;
    g["pass"] = c.gate.pass;
    g["prefix"] = c.gate.prefix;
    g["resume"] = {{"token", c.gate.resume_token}, {"position", c.gate.resume_position}};
    g["native_first_token"] = c.gate.native_first;
    g["verdict"] = kv::verdict_json(c.gate.verdict);
    j["gate"] = g;
    ordered_json s;
    s["exact"] = c.self.exact;
    s["mismatches"] = c.self.mismatches;
    s["min_cosine"] = c.self.min_cosine;
    s["max_mse"] = c.self.max_mse;
    s["max_abs"] = c.self.max_abs;
    s["min_r2"] = c.self.min_r2 ? ordered_json(*c.self.min_r2) : ordered_json(nullptr);
    j["self_compare"] = s;
    ordered_json k;
    k["detected"] = c.control.detected;
    k["operation"] = c.control.operation;
    k["receipt_sha256"] = c.control.receipt_sha256;
    k["changed"] = {{"k", c.control.changed_k}, {"v", c.control.changed_v}};
    k["compare"] = {{"mismatches_at_head", c.control.mismatches_at_target},
                    {"mismatches_elsewhere", c.control.mismatches_elsewhere},
                    {"cosine_k", c.control.cosine_k},
                    {"cosine_v", c.control.cosine_v}};
    k["diagnostics"] = {{"steps", c.control.steps},
                        {"top1_agreement", c.control.top1_agreement},
                        {"logits_max_abs_step0", c.control.logits_max_abs},
                        {"logits_kl_step0", c.control.logits_kl ? ordered_json(*c.control.logits_kl)
                                                                : ordered_json(nullptr)}};
    j["control"] = k;
  } else {
    j["gate"] = nullptr;
    j["self_compare"] = nullptr;
    j["control"] = nullptr;
  }
  j["dir"] = c.dir.empty() ? ordered_json(nullptr) : ordered_json(c.dir);
  j["observed_seconds"] = c.seconds;
  return j;
}

}  // namespace

std::string MatrixReport::table() const {
  const std::vector<std::pair<const char*, size_t>> cols = {
      {"model", 22}, {"arch", 5}, {"weights", 10}, {"prompt", 8}, {"P", 4}, {"resume", 10}, {"threads", 7},
      {"simd", 32},  {"gate", 12}, {"self", 6},    {"control", 19}, {"result", 0}};
  std::string o;
  for (const auto& [name, w] : cols) o += w ? pad(name, w) : std::string(name);
  o += "\n";
  for (const MatrixCell& c : cells) {
    const bool r = ran(c);
    const std::vector<std::string> v = {
        c.model_name,
        c.architecture.empty() ? "-" : c.architecture,
        c.weights.empty() ? "-" : c.weights,
        c.prompt_id,
        r ? std::to_string(c.gate.prefix) : "-",
        r ? std::to_string(c.gate.resume_token) + "@" + std::to_string(c.gate.resume_position) : "-",
        c.status == "error" && c.variant == "*" ? "-" : roles(c.threads),
        c.status == "error" && c.variant == "*" ? "-" : roles(c.simd),
        gate_text(c),
        self_text(c),
        control_text(c),
        c.status == "pass" ? "pass" : c.status + ": " + c.reason};
    for (size_t i = 0; i < cols.size(); ++i) o += cols[i].second ? pad(v[i], cols[i].second) : v[i];
    o += "\n";
  }
  o += "kv matrix: " + std::to_string(passed()) + " passed, " + std::to_string(failed()) + " failed, " +
       std::to_string(errors()) + " errors, " + std::to_string(skipped()) + " skipped (" +
       std::to_string(cells.size()) + " cells = " + std::to_string(model_paths.size()) + " models x " +
       std::to_string(prompt_count()) + " prompts x " +
       std::to_string(variants.size()) + " variants, N=" + std::to_string(steps) + "; SIMD paths on this CPU:";
  for (const std::string& s : supported_simd) o += " " + s;
  o += ", default " + default_simd + ")\n";
  for (const MatrixCell& c : cells)
    if (c.status == "fail" || c.status == "error")
      o += "  " + c.status + ": " + c.model_name + " / " + c.prompt_id + " / " + c.variant + ": " + c.reason + "\n";
  return o;
}

std::string MatrixReport::json() const { return pretty_json(json_doc()); }

ordered_json MatrixReport::json_doc() const {
  ordered_json j;
  j["kind"] = "ember.kv-matrix";
  j["version"] = 1;
  j["steps"] = steps;
  j["cpu"] = {{"best_simd", cpu_simd}, {"default_simd", default_simd}, {"supported_simd", supported_simd}};
  ordered_json vs = ordered_json::array();
  for (const MatrixVariant& v : variants) {
    ordered_json t = ordered_json::array(), s = ordered_json::array();
    for (size_t r = 0; r < 3; ++r) {
      t.push_back(v.threads[r] > 0 ? ordered_json(v.threads[r]) : ordered_json("default"));
      s.push_back(v.simd[r] ? ordered_json(simd_name(*v.simd[r])) : ordered_json("default"));
    }
    vs.push_back({{"spec", v.spec}, {"threads", t}, {"simd", s}, {"missing_paths", v.missing_paths(parse_simd(cpu_simd))}});
  }
  j["variants"] = vs;
  j["models"] = model_paths;
  j["summary"] = {{"cells", cells.size()}, {"passed", passed()}, {"failed", failed()},
                  {"errors", errors()},    {"skipped", skipped()}, {"ok", ok()}};
  ordered_json cs = ordered_json::array();
  for (const MatrixCell& c : cells) cs.push_back(cell_json(c));
  j["cells"] = cs;
  return j;
}

std::string MatrixReport::html(const html::Stamp& stamp) const {
  std::string h =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>ember kv matrix</title>"
      "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
      "td,th{border:1px solid #bbb;padding:3px 8px}th{background:#eee}td.n{text-align:right}"
      ".pass{background:#e8f1e8}.fail,.error{background:" + far_colour() + ";color:#fff}"
      ".skipped{background:#eee;color:#666}</style></head><body>\n<h1>Exact-replay matrix</h1>\n" +
      html::stamp_html(stamp);
  h += "<p>" + std::to_string(cells.size()) + " cells: <b>" + std::to_string(passed()) + " passed</b>, " +
       std::to_string(failed()) + " failed, " + std::to_string(errors()) + " errors, " +
       std::to_string(skipped()) + " skipped. N = " + std::to_string(steps) +
       " native steps; each cell: export, the replay gate (native[N,V] == concat(boundary[1,V], "
       "replay[N-1,V]), f32 bit for bit), a self-compare (every metric exact) and a zeroing control "
       "(must be detected). SIMD paths on this CPU:";
  for (const std::string& s : supported_simd) h += " " + html_escape(s);
  h += "; default " + html_escape(default_simd) + ".</p>\n";
  // The grid: one row per (model, prompt), one column per variant.
  h += "<h2>Grid</h2>\n<table><tr><th>model</th><th>weights</th><th>prompt</th>";
  for (size_t i = 0; i < variants.size(); ++i) h += "<th>" + html_escape(variants[i].spec) + "</th>";
  h += "</tr>\n";
  for (size_t i = 0; i < cells.size();) {
    const MatrixCell& first = cells[i];
    h += "<tr><td>" + html_escape(first.model_name) + "</td><td>" + html_escape(first.weights) + "</td><td>" +
         html_escape(first.prompt_id) + "</td>";
    size_t j = i;
    for (; j < cells.size() && cells[j].model_index == first.model_index &&
           cells[j].prompt_index == first.prompt_index && cells[j].prompt_id == first.prompt_id;
         ++j) {
      const MatrixCell& c = cells[j];
      const std::string span = c.variant == "*" ? " colspan=\"" + std::to_string(variants.size()) + "\"" : "";
      h += "<td class=\"" + c.status + "\"" + span + " title=\"" +
           html_escape(c.model_name + " / " + c.prompt_id + " / " + c.variant + ": " +
                       (c.status == "pass" ? "pass" : c.reason)) +
           "\">" + html_escape(c.status) + "</td>";
    }
    h += "</tr>\n";
    i = j;
  }
  h += "</table>\n<h2>Cells</h2>\n<table><tr><th>model</th><th>arch</th><th>weights</th><th>prompt</th>"
       "<th>P</th><th>resume</th><th>threads</th><th>simd</th><th>gate</th><th>self</th>"
       "<th>control</th><th>result</th></tr>\n";
  for (const MatrixCell& c : cells) {
    const bool r = ran(c);
    h += "<tr><td>" + html_escape(c.model_name) + "</td><td>" + html_escape(c.architecture) + "</td><td>" +
         html_escape(c.weights) + "</td><td>" + html_escape(c.prompt_id) + "</td><td class=\"n\">" +
         (r ? std::to_string(c.gate.prefix) : "-") + "</td><td class=\"n\">" +
         (r ? std::to_string(c.gate.resume_token) + "@" + std::to_string(c.gate.resume_position) : "-") +
         "</td><td>" + html_escape(roles(c.threads)) + "</td><td>" + html_escape(roles(c.simd)) + "</td><td>" +
         html_escape(gate_text(c)) + "</td><td>" + html_escape(self_text(c)) + "</td><td>" +
         html_escape(control_text(c)) + "</td><td class=\"" + c.status + "\">" +
         html_escape(c.status == "pass" ? "pass" : c.status + ": " + c.reason) + "</td></tr>\n";
  }
  return h + "</table>\n</body></html>\n";
}

}  // namespace ember::analysis
