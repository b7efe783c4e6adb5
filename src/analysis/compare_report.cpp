// Rendering of a CompareReport: canonical JSON and the human table.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "analysis/compare.h"
#include "util/f16.h"
#include "util/sha256.h"
#include "util/printable.h"

namespace ember::analysis {

// The K and V cache types a side stands for: ember's own caches are f16; a foreign cache names
// the types its source stored (imported rounded to f16); a quantize perturbation on RIGHT is
// that type emulated in ember's f16 cache, on the layers and parts its receipt names.
std::pair<std::string, std::string> side_cache_types(const SideSummary& s, const PerturbReceipt* p) {
  std::pair<std::string, std::string> t = state_cache_type_pair(s.identity);
  if (p && p->spec.quantize) {
    std::string q = gguf::type_name(uint32_t(*p->spec.quantize)) + " (emulated in f16, layers ";
    for (size_t i = 0; i < p->spec.layers.size(); ++i) q += (i ? "," : "") + std::to_string(p->spec.layers[i]);
    q += ")";
    if (p->spec.part != PerturbPart::v) t.first = q;
    if (p->spec.part != PerturbPart::k) t.second = q;
  }
  return t;
}


namespace {

using ojson = nlohmann::ordered_json;

ojson opt(const std::optional<double>& v) { return v ? ojson(*v) : ojson(nullptr); }
ojson opt_int(const std::optional<int>& v) { return v ? ojson(*v) : ojson(nullptr); }

std::string prefix_sha256(const std::vector<int32_t>& tokens) {
  return sha256_hex(tokens.data(), tokens.size() * sizeof(int32_t));  // int32 little-endian
}

ojson side_json(const SideSummary& s, const PerturbReceipt* p = nullptr) {
  const auto [ck, cv] = side_cache_types(s, p);
  ojson prov = ojson::object();
  for (const auto& [k, v] : s.identity.provenance) prov[k] = v;
  return ojson{{"kind", s.identity.kind},
               {"model_identity", s.identity.model_identity},
               {"architecture", s.identity.architecture},
               {"weights", s.identity.weights},
               {"engine_fingerprint", s.identity.engine_fingerprint},
               {"snapshot_id", s.identity.snapshot_id.empty() ? ojson(nullptr)
                                                              : ojson(s.identity.snapshot_id)},
               {"keys_sha256", s.identity.keys_sha256},
               {"values_sha256", s.identity.values_sha256},
               {"resume_token", s.resume_token},
               {"cache_types", {{"k", ck}, {"v", cv}}},
               {"provenance", prov}};
}

ojson part_json(const PartMetrics& m) {
  return ojson{{"cosine", opt(m.cosine)},   {"mse", opt(m.mse)},
               {"r2", opt(m.r2)},           {"max_abs", opt(m.max_abs)},
               {"mismatches", m.mismatches}, {"elements", m.elements},
               {"non_finite", m.non_finite}};
}

ojson failure_json(const Failure& f) {
  return ojson{{"layer", f.layer},   {"head", f.head},          {"part", part_name(f.part)},
               {"metric", f.metric}, {"value", opt(f.value)}, {"threshold", f.threshold}};
}

struct PartSummary {
  uint64_t elements = 0, mismatches = 0, non_finite = 0;
  std::optional<double> min_cosine, max_mse, min_r2, max_abs;
};

PartSummary summarize(const KvMetrics& m, KvPart part) {
  PartSummary s;
  auto lower = [](std::optional<double>& acc, const std::optional<double>& v) {
    if (v && (!acc || *v < *acc)) acc = v;
  };
  auto upper = [](std::optional<double>& acc, const std::optional<double>& v) {
    if (v && (!acc || *v > *acc)) acc = v;
  };
  for (const HeadMetrics& h : m.heads) {
    const PartMetrics& p = h.part(part);
    s.elements += p.elements;
    s.mismatches += p.mismatches;
    s.non_finite += p.non_finite;
    lower(s.min_cosine, p.cosine);
    upper(s.max_mse, p.mse);
    lower(s.min_r2, p.r2);
    upper(s.max_abs, p.max_abs);
  }
  return s;
}

ojson summary_json(const PartSummary& s) {
  return ojson{{"elements", s.elements},      {"mismatches", s.mismatches},
               {"non_finite", s.non_finite},  {"min_cosine", opt(s.min_cosine)},
               {"max_mse", opt(s.max_mse)},   {"min_r2", opt(s.min_r2)},
               {"max_abs", opt(s.max_abs)}};
}

ojson vector_json(const VectorCompare& v) {
  return ojson{{"cosine", v.cosine}, {"rel_error", opt(v.rel_error)}, {"max_abs", v.max_abs}};
}

// The logits' vector metrics plus KL(LEFT || RIGHT) of their softmax (util/kl.h).
ojson logits_json(const SameInputStep& s) {
  ojson j = vector_json(s.logits);
  j["kl"] = opt(s.logits_kl);
  return j;
}

ojson diagnostics_json(const Diagnostics& d) {
  ojson steps = ojson::array();
  for (const SameInputStep& s : d.same_input.steps) {
    ojson layers = ojson::array();
    for (size_t l = 0; l < s.attn_out.size(); ++l) {
      ojson one = vector_json(s.attn_out[l]);
      ojson with_layer{{"layer", int(l)}};
      for (auto& [k, v] : one.items()) with_layer[k] = v;
      layers.push_back(with_layer);
    }
    steps.push_back(ojson{{"step", s.step},
                          {"position", s.position},
                          {"input_token", s.input_token},
                          {"attn_out", layers},
                          {"logits", logits_json(s)},
                          {"top1", {{"left", s.top1_left},
                                    {"right", s.top1_right},
                                    {"agree", s.top1_left == s.top1_right}}}});
  }
  const GreedyPhase& g = d.greedy;
  return ojson{
      {"model_identity", d.model_identity},
      {"steps", d.steps},
      {"reference", "left"},
      {"same_input",
       {{"path", "reference-greedy: LEFT's resume token, then LEFT's argmax"},
        {"steps", steps},
        {"top1_agreement", d.same_input.top1_agreement},
        {"kl", {{"definition", "KL(softmax(LEFT logits) || softmax(RIGHT logits)), nats"},
                {"mean", opt(d.same_input.mean_kl)},
                {"max", opt(d.same_input.max_kl)}}},
        {"first_disagreement", opt_int(d.same_input.first_disagreement)}}},
      {"independent_greedy",
       {{"left", g.left},
        {"right", g.right},
        {"identical", g.identical()},
        {"agreeing_prefix", g.agreeing_prefix},
        {"first_divergence", opt_int(g.first_divergence)}}}};
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}
std::string fmt_opt(const char* f, const std::optional<double>& v) {
  return v ? fmt(f, *v) : std::string("-");
}
std::string short_id(const std::string& s) { return s.empty() ? "-" : printable(s.substr(0, 16)); }

}  // namespace

std::string report_json(const CompareReport& r) {
  ojson j;
  j["format"] = "ember.kv-compare-report";
  j["version"] = 1;
  j["left"] = side_json(r.left);
  j["right"] = side_json(r.right, r.perturbation ? &*r.perturbation : nullptr);
  ojson repr = ojson::object();
  for (const auto& [k, v] : r.coords.representation) repr[k] = v;
  j["alignment"] = {{"geometry",
                     {{"layers", r.coords.n_layers},
                      {"kv_heads", r.coords.n_kv_heads},
                      {"head_dim", r.coords.head_dim}}},
                    {"positions", r.coords.n_pos},
                    {"prefix_tokens",
                     {{"count", r.coords.prefix_tokens.size()},
                      {"sha256_i32le", prefix_sha256(r.coords.prefix_tokens)}}},
                    {"tokenizer_identity", r.coords.tokenizer_identity},
                    {"representation", repr}};
  j["crossing"] = {{"crosses_models", r.crossing.crosses_models},
                   {"crosses_engines", r.crossing.crosses_engines},
                   {"label", r.crossing.label},
                   {"statement", r.crossing.statement}};
  if (r.perturbation) {
    j["perturbation"] = {{"applied_to", "right"},
                         {"receipt_sha256", r.perturbation_receipt_sha256},
                         {"receipt", ojson::parse(receipt_json(*r.perturbation))}};
  } else {
    j["perturbation"] = nullptr;
  }
  j["metrics"] = {{"r2", r.options.r2},
                  {"r2_definition", "1 - SS(right - left) / SS(right - mean(right))"},
                  {"arithmetic", "f64 over f16 values, sequential sums in storage order"}};
  const Thresholds& t = r.options.thresholds;
  j["thresholds"] = {{"min_cosine", opt(t.min_cosine)},
                     {"max_mse", opt(t.max_mse)},
                     {"min_r2", opt(t.min_r2)},
                     {"max_abs", opt(t.max_abs)}};
  j["summary"] = {{"identical", r.metrics.identical()},
                  {"k", summary_json(summarize(r.metrics, KvPart::k))},
                  {"v", summary_json(summarize(r.metrics, KvPart::v))}};
  ojson heads = ojson::array();
  for (int l = 0; l < r.metrics.n_layers; ++l) {
    for (int h = 0; h < r.metrics.n_kv_heads; ++h) {
      const HeadMetrics& hm = r.metrics.at(l, h);
      heads.push_back(ojson{{"layer", l}, {"head", h}, {"k", part_json(hm.k)},
                            {"v", part_json(hm.v)}});
    }
  }
  j["heads"] = heads;
  ojson failures = ojson::array();
  for (const Failure& f : r.failures) failures.push_back(failure_json(f));
  j["failures"] = failures;
  j["first_exceedance"] = r.failures.empty() ? ojson(nullptr) : failure_json(r.failures[0]);
  j["result"] = r.pass() ? "pass" : "fail";
  j["diagnostics"] = r.diagnostics ? diagnostics_json(*r.diagnostics) : ojson(nullptr);
  return j.dump(2) + "\n";
}

std::string report_table(const CompareReport& r) {
  std::string o;
  auto side = [&](const char* name, const SideSummary& s, const PerturbReceipt* p) {
    const auto [ck, cv] = side_cache_types(s, p);
    // Strings from the two manifests are escaped (util/printable.h): one line each, no ESC.
    o += std::string(name) + ": " + printable(s.identity.kind) + " state, model " +
         short_id(s.identity.model_identity) + " (" + printable(s.identity.architecture) + ", " +
         printable(s.identity.weights) + "), snapshot " + short_id(s.identity.snapshot_id) +
         ", resume token " + std::to_string(s.resume_token) + ", cache K " + printable(ck) + " / V " +
         printable(cv) + "\n";
  };
  side("LEFT ", r.left, nullptr);
  side("RIGHT", r.right, r.perturbation ? &*r.perturbation : nullptr);
  o += "aligned: " + std::to_string(r.coords.n_layers) + " layers x " +
       std::to_string(r.coords.n_kv_heads) + " KV heads x head_dim " +
       std::to_string(r.coords.head_dim) + ", " + std::to_string(r.coords.n_pos) +
       " prefix positions\n";
  o += printable(r.crossing.statement) + "\n";
  if (r.perturbation) {
    const PerturbReceipt& p = *r.perturbation;
    o += "RIGHT perturbed in memory by receipt " + short_id(r.perturbation_receipt_sha256) +
         ": " + describe_operation(p.spec) + "\n";
  }
  o += "\nlayer head part       cosine          mse           r2      max_abs  mismatches/elements\n";
  for (int l = 0; l < r.metrics.n_layers; ++l) {
    for (int h = 0; h < r.metrics.n_kv_heads; ++h) {
      for (KvPart part : {KvPart::k, KvPart::v}) {
        const PartMetrics& m = r.metrics.at(l, h).part(part);
        char line[256];
        std::snprintf(line, sizeof line, "%5d %4d %4s %12s %12s %12s %12s  %llu/%llu\n", l, h,
                      part_name(part), fmt_opt("%.9f", m.cosine).c_str(),
                      fmt_opt("%.3e", m.mse).c_str(), fmt_opt("%.6f", m.r2).c_str(),
                      fmt_opt("%.3e", m.max_abs).c_str(), (unsigned long long)m.mismatches,
                      (unsigned long long)m.elements);
        o += line;
      }
    }
  }
  if (r.diagnostics) {
    const Diagnostics& d = *r.diagnostics;
    o += "\nsame-input diagnostics (LEFT's reference-greedy path, " + std::to_string(d.steps) +
         " steps)\n";
    o += " step   pos  token  logit-cos    logit-rel   logit-maxabs  logit-KL   top1 L/R  worst attn-out cos (layer)\n";
    for (const SameInputStep& s : d.same_input.steps) {
      size_t worst = 0;
      for (size_t l = 1; l < s.attn_out.size(); ++l) {
        if (s.attn_out[l].cosine < s.attn_out[worst].cosine) worst = l;
      }
      char line[256];
      std::snprintf(line, sizeof line, "%5d %5d %6d %12.9f %12s %12.3e %10s %5d/%-5d %s %12.9f (%zu)\n",
                    s.step, s.position, s.input_token, s.logits.cosine,
                    fmt_opt("%.3e", s.logits.rel_error).c_str(), s.logits.max_abs,
                    fmt_opt("%.3e", s.logits_kl).c_str(), s.top1_left,
                    s.top1_right, s.top1_left == s.top1_right ? " " : "!",
                    s.attn_out.empty() ? 1.0 : s.attn_out[worst].cosine, worst);
      o += line;
    }
    o += "KL(LEFT || RIGHT) of the next-token distribution: mean " +
         fmt_opt("%.3e", d.same_input.mean_kl) + ", max " + fmt_opt("%.3e", d.same_input.max_kl) +
         " nats\n";
    o += "top-1 agreement: " + std::to_string(d.same_input.top1_agreement) + "/" +
         std::to_string(d.same_input.steps.size()) + ", first disagreement: " +
         (d.same_input.first_disagreement ? "step " + std::to_string(*d.same_input.first_disagreement)
                                          : std::string("none")) + "\n";
    o += "independent greedy: " + std::string(d.greedy.identical() ? "identical" : "diverged") +
         ", agreeing prefix " + std::to_string(d.greedy.agreeing_prefix) + "/" +
         std::to_string(d.greedy.left.size()) + ", first divergence: " +
         (d.greedy.first_divergence ? "token " + std::to_string(*d.greedy.first_divergence)
                                    : std::string("none")) + "\n";
  }
  o += "\n";
  const uint64_t mism = summarize(r.metrics, KvPart::k).mismatches +
                        summarize(r.metrics, KvPart::v).mismatches;
  o += r.metrics.identical() ? "K/V identical: no f16 bit differs\n"
                             : "K/V differ: " + std::to_string(mism) + " f16 elements differ\n";
  if (r.options.thresholds.any()) {
    if (r.pass()) {
      o += "PASS: every metric within its threshold\n";
    } else {
      const Failure& f = r.failures[0];
      o += "FAIL: " + std::to_string(r.failures.size()) + " exceedance(s); first: layer " +
           std::to_string(f.layer) + " head " + std::to_string(f.head) + " " +
           part_name(f.part) + " " + f.metric + " = " + fmt_opt("%.9g", f.value) +
           " (threshold " + fmt("%.9g", f.threshold) + ")\n";
    }
  }
  return o;
}

}  // namespace ember::analysis
