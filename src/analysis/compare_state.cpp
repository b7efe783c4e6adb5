#include "analysis/compare_state.h"

#include "kv/state.h"
#include "util/byte_io.h"
#include "util/error.h"
#include "util/sha256.h"

namespace ember::analysis {

namespace {

std::string active_sha256(const model::KvCache& c, kv::Payload which) {
  HashingSink h;
  kv::write_payload(c, which, h);  // the one serializer: the bytes of a payload file
  return to_hex(h.finish());
}

[[noreturn]] void refuse(const std::string& coordinate, const std::string& left,
                         const std::string& right) {
  fail_field("kv compare", "coordinate " + coordinate, left + " (LEFT)", right + " (RIGHT)");
}

void same_int(const char* coordinate, int64_t l, int64_t r) {
  if (l != r) refuse(coordinate, std::to_string(l), std::to_string(r));
}

std::string short_id(const std::string& hex) { return hex.size() > 16 ? hex.substr(0, 16) : hex; }

}  // namespace

std::string active_keys_sha256(const model::KvCache& cache) { return active_sha256(cache, kv::Payload::keys); }
std::string active_values_sha256(const model::KvCache& cache) { return active_sha256(cache, kv::Payload::values); }

void check_state_consistent(const ComparedState& s, const std::string& where) {
  const model::KvCache& c = s.cache;
  const StateCoordinates& x = s.coords;
  if (c.n_layers != x.n_layers || c.n_kv_heads != x.n_kv_heads || c.head_dim != x.head_dim) {
    fail_field(where, "cache geometry",
               std::to_string(x.n_layers) + "x" + std::to_string(x.n_kv_heads) + "x" +
                   std::to_string(x.head_dim),
               std::to_string(c.n_layers) + "x" + std::to_string(c.n_kv_heads) + "x" +
                   std::to_string(c.head_dim));
  }
  if (c.n_pos != x.n_pos || c.n_pos > c.capacity || c.n_pos < 0) {
    fail_field(where, "cache positions", std::to_string(x.n_pos), std::to_string(c.n_pos));
  }
  if (x.prefix_tokens.size() != size_t(x.n_pos)) {
    fail_field(where, "prefix token count", std::to_string(x.n_pos),
               std::to_string(x.prefix_tokens.size()));
  }
  const size_t want = size_t(c.n_layers) * size_t(c.n_kv_heads) * size_t(c.capacity) *
                      size_t(c.head_dim);
  if (c.k.size() != want || c.v.size() != want) {
    fail_field(where, "cache storage", std::to_string(want), std::to_string(c.k.size()));
  }
}

void check_alignment(const ComparedState& left, const ComparedState& right) {
  const StateCoordinates& a = left.coords;
  const StateCoordinates& b = right.coords;
  same_int("geometry.layers", a.n_layers, b.n_layers);
  same_int("geometry.kv_heads", a.n_kv_heads, b.n_kv_heads);
  same_int("geometry.head_dim", a.head_dim, b.head_dim);
  same_int("positions", a.n_pos, b.n_pos);
  for (size_t i = 0; i < a.prefix_tokens.size() && i < b.prefix_tokens.size(); ++i) {
    if (a.prefix_tokens[i] != b.prefix_tokens[i]) {
      refuse("prefix_tokens[" + std::to_string(i) + "]", std::to_string(a.prefix_tokens[i]),
             std::to_string(b.prefix_tokens[i]));
    }
  }
  same_int("prefix_tokens.count", int64_t(a.prefix_tokens.size()), int64_t(b.prefix_tokens.size()));
  if (a.tokenizer_identity != b.tokenizer_identity) {
    refuse("tokenizer", a.tokenizer_identity, b.tokenizer_identity);
  }
  for (const auto& [name, value] : a.representation) {
    const std::string* found = nullptr;
    for (const auto& [rn, rv] : b.representation) {
      if (rn == name) found = &rv;
    }
    if (found == nullptr) refuse("representation." + name, value, "absent");
    if (*found != value) refuse("representation." + name, value, *found);
  }
  for (const auto& [name, value] : b.representation) {
    bool present = false;
    for (const auto& [ln, lv] : a.representation) present = present || ln == name;
    if (!present) refuse("representation." + name, "absent", value);
  }
}

std::string state_engine(const StateIdentity& s) {
  if (s.kind != "foreign") return "ember";
  for (const auto& [name, value] : s.provenance)
    if (name == "foreign.engine") return value;
  return "unknown";
}

std::pair<std::string, std::string> state_cache_type_pair(const StateIdentity& s) {
  std::string k = "f16", v = "f16", kr, vr;
  if (s.kind == "foreign")
    for (const auto& [name, value] : s.provenance) {
      if (name == "foreign.cache_type_k") k = value;
      if (name == "foreign.cache_type_v") v = value;
      if (name == "foreign.k_rotation" && value != "none") kr = "+" + value;
      if (name == "foreign.v_rotation" && value != "none") vr = "+" + value;
    }
  return {k + kr, v + vr};
}

std::string state_cache_types(const StateIdentity& s, bool* quantized) {
  const auto [k, v] = state_cache_type_pair(s);
  auto q = [](const std::string& t) { return t != "f16" && t != "f32" && t != "bf16"; };
  if (quantized) *quantized = q(k) || q(v);
  return "K " + k + ", V " + v;
}

Crossing classify_crossing(const StateIdentity& left, const StateIdentity& right) {
  Crossing c;
  const std::string le = state_engine(left), re = state_engine(right);
  bool lq = false, rq = false;
  const std::string lt = state_cache_types(left, &lq), rt = state_cache_types(right, &rq);
  // A quantized cache's error is its quantization first, not arithmetic: say which side's.
  const std::string quant = lq || rq ? std::string(" and the quantization of ") +
                                           (lq ? "LEFT's cache (" + lt + ")" : "") + (lq && rq ? " and " : "") +
                                           (rq ? "RIGHT's cache (" + rt + ")" : "")
                                     : "";
  if (le != re) {
    // Two engines' arithmetic: the differences include each engine's rounding and kernels
    // and, for a quantized foreign cache, its quantization, so this is never a same-model
    // comparison even on one GGUF.
    c.crosses_engines = true;
    c.crosses_models = left.model_identity != right.model_identity;
    c.label = "cross-engine";
    c.statement = "This comparison crosses engines: LEFT computed by " + le + ", RIGHT by " + re +
                  (c.crosses_models ? "; it also crosses models: LEFT model " +
                                          short_id(left.model_identity) + ", RIGHT model " +
                                          short_id(right.model_identity)
                                    : "; same model (" + short_id(left.model_identity) +
                                          "), so the differences are the two engines' arithmetic" + quant) +
                  ".";
    return c;
  }
  if (left.model_identity == right.model_identity) {
    c.label = "same-model";
    c.statement = "LEFT and RIGHT come from the same model (" + short_id(left.model_identity) + ")" +
                  (le != "ember" ? ", both computed by " + le : "") + ".";
    return c;
  }
  c.crosses_models = true;
  const std::string who = "LEFT model " + short_id(left.model_identity) + " (" +
                          left.architecture + ", " + left.weights + "), RIGHT model " +
                          short_id(right.model_identity) + " (" + right.architecture + ", " +
                          right.weights + ")";
  if (left.architecture == right.architecture && !left.weights.empty() &&
      !right.weights.empty() && left.weights != right.weights) {
    c.label = "quantization-boundary";
    c.statement = "This comparison crosses models: " + who +
                  "; same architecture, tokenizer and cache geometry with different weight "
                  "types: a quantization-boundary study, not a cross-model transfer result.";
  } else {
    c.label = "cross-model";
    c.statement = "This comparison crosses models: " + who +
                  "; same tokenizer and cache geometry.";
  }
  return c;
}

}  // namespace ember::analysis
