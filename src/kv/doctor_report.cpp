// kv doctor's report: text for a person, JSON for a script (same facts, same order).
#include <cstdio>
#include <map>

#include "kv/doctor.h"

namespace ember::kv {
namespace {

std::string fmt(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", x);
  return b;
}

nlohmann::ordered_json row_json(const RowError& e) {
  return {{"layer", e.layer}, {"head", e.head}, {"position", e.position}, {"error", e.error}};
}

nlohmann::ordered_json pooled_json(const PooledError& p) {
  return {{"error", p.error}, {"bound", p.bound}, {"ok", p.ok()}, {"worst", row_json(p.worst)}};
}

nlohmann::ordered_json part_json(const PartCheck& p) {
  return {{"stored_as", stored_row_type_name(p.stored)},
          {"layer0", pooled_json(p.layer0)},
          {"all_layers", pooled_json(p.all)},
          {"elements", p.elements},
          {"differing_elements", p.differing}};
}

}  // namespace

nlohmann::ordered_json doctor_json(const DoctorReport& r) {
  nlohmann::ordered_json j;
  j["file"] = r.file;
  j["verdict"] = doctor_verdict_name(r.verdict);
  j["exit_code"] = r.exit_code();
  j["reason"] = r.reason;
  if (r.sidecar.present)
    j["sidecar"] = {{"model_identity", r.sidecar.model_identity},
                    {"engine", r.sidecar.engine},
                    {"hash_matches", r.sidecar.hash_matches},
                    {"model_matches", r.sidecar.model_matches}};
  if (!r.parsed) return j;
  j["positions"] = r.positions;
  j["cache_type_k"] = r.type_k;
  j["cache_type_v"] = r.type_v;
  j["v_layout"] = r.v_layout;
  j["checked_positions"] = r.check.positions.size();
  j["keys"] = part_json(r.check.k);
  j["values"] = part_json(r.check.v);
  auto rows = nlohmann::ordered_json::array();
  for (const auto* bad : {&r.bad_k, &r.bad_v})
    for (const RowError& e : *bad) {
      nlohmann::ordered_json x = row_json(e);
      x["part"] = bad == &r.bad_k ? "k" : "v";
      rows.push_back(x);
    }
  j["rows_past_bound"] = rows;
  if (r.verdict != DoctorVerdict::compatible) return j;
  auto heads = nlohmann::ordered_json::array();
  for (const HeadAttribution& h : r.heads)
    heads.push_back({{"layer", h.layer},
                     {"head", h.head},
                     {"part", std::string(1, h.part)},
                     {"error", h.error},
                     {"without_quantization_model", h.without_quant},
                     {"without_rotation_model", h.without_rot},
                     {"explained_by", h.explained_by}});
  j["heads"] = heads;
  j["cold_run_measured"] = r.cold_measured;
  auto next = nlohmann::ordered_json::array();
  for (const NextToken& t : r.next) {
    nlohmann::ordered_json x = {{"cached", t.cached}, {"margin", t.margin}};
    if (r.cold_measured) {
      x["cold"] = t.cold;
      x["logit_diff"] = t.logit_diff;
      x["same"] = t.same;
      x["at_risk"] = t.at_risk;
    }
    next.push_back(x);
  }
  j["next_tokens"] = next;
  return j;
}

std::string doctor_text(const DoctorReport& r) {
  std::string s = r.file + ": " + doctor_verdict_name(r.verdict) + ": " + r.reason + "\n";
  if (r.sidecar.present)
    s += "ember serve sidecar: model " + std::string(r.sidecar.model_matches ? "matches" : "differs") +
         ", state hash " + (r.sidecar.hash_matches ? "matches" : "differs") + ", engine " + r.sidecar.engine + "\n";
  if (!r.parsed) return s;
  s += std::to_string(r.positions) + " positions; K " + r.type_k + ", V " + r.type_v + " (" + r.v_layout +
       "); " + std::to_string(r.check.positions.size()) + " positions recomputed\n";
  for (const PartCheck* p : {&r.check.k, &r.check.v})
    s += std::string(p == &r.check.k ? "keys  " : "values") + ": layer 0 " + fmt(p->layer0.error) + " (bound " +
         fmt(p->layer0.bound) + "), every layer " + fmt(p->all.error) + " (bound " + fmt(p->all.bound) +
         "), worst row layer " + std::to_string(p->all.worst.layer) + " head " + std::to_string(p->all.worst.head) +
         " position " + std::to_string(p->all.worst.position) + " (" + fmt(p->all.worst.error) + ")\n";
  if (r.verdict != DoctorVerdict::compatible) return s;
  std::map<std::string, int> by;
  for (const HeadAttribution& h : r.heads) ++by[h.explained_by];
  s += "per-head error explained by:";
  for (const auto& [what, n] : by) s += " " + what + " " + std::to_string(n) + ";";
  s += "\n";
  // The heads a person looks at: those past the rounding floor, at most 16.
  int shown = 0;
  for (const HeadAttribution& h : r.heads)
    if (h.explained_by == "reduction-order drift" || h.explained_by == "unexplained")
      if (++shown <= 16)
        s += "  " + std::string(1, h.part) + " layer " + std::to_string(h.layer) + " head " + std::to_string(h.head) +
           ": " + fmt(h.error) + " (" + h.explained_by + "; without the quantization model " +
           fmt(h.without_quant) + ", without the rotation " + fmt(h.without_rot) + ")\n";
  if (shown > 16) s += "  (and " + std::to_string(shown - 16) + " more heads: --json lists every one)\n";
  s += std::string("next tokens (") +
       (r.cold_measured ? "against a cold run, measured" : "cold run not measured: margins only") + "):";
  for (const NextToken& t : r.next) {
    s += " " + std::to_string(t.cached);
    if (r.cold_measured) s += t.same ? (t.at_risk ? "(at risk)" : "") : "(cold " + std::to_string(t.cold) + ")";
  }
  s += "\n";
  if (r.cold_measured) {
    int same = 0, risk = 0;
    double worst = 0;
    for (const NextToken& t : r.next) same += t.same, risk += t.at_risk, worst = std::max(worst, t.logit_diff);
    s += "cold equivalence: " + std::to_string(same) + "/" + std::to_string(r.next.size()) +
         " tokens the cold run's, " + std::to_string(risk) + " at risk (top-2 margin <= 2 x the measured logit " +
         "difference, at most " + fmt(worst) + ")\n";
  }
  return s;
}

}  // namespace ember::kv
