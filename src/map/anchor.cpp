#include "map/anchor.h"

#include <cstring>

#include "util/error.h"

namespace ember::map {

double layer_macs(const model::ModelConfig& c) {
  const double e = c.n_embd, q = double(c.n_heads) * c.head_dim, kv = double(c.n_kv_heads) * c.head_dim;
  return e * q /* Q */ + 2 * e * kv /* K, V */ + q * e /* O */ + (c.ffn_activation == model::FfnActivation::gelu ? 2 : 3) * e * c.n_ff /* (gate,) up, down */;
}

double kv_projection_macs(const model::ModelConfig& c) {
  return 2.0 * c.n_embd * double(c.n_kv_heads) * c.head_dim;
}

nlohmann::json AnchorReport::to_json() const {
  nlohmann::json roles_json = nlohmann::json::array();
  for (size_t l = 0; l < roles.size(); ++l)
    roles_json.push_back({{"layer", l}, {"role", layer_role_name(roles[l])}});
  return {{"s", s}, {"a", a}, {"n_layers", n_layers}, {"prefix_positions", prefix},
          {"layers", roles_json},
          {"full_prefill_macs_per_token", full_prefill_macs_per_token},
          {"target_macs_per_token", target_macs_per_token},
          {"mapping_macs_per_token", mapping_macs_per_token},
          {"prefill_work_saved", prefill_work_saved()}};
}

model::KvCache anchor_handoff(model::Engine& target, const model::ModelConfig& sc,
                              const Mapper* mapper, const model::KvCache& src,
                              std::span<const int32_t> prefix, const float* source_residual,
                              int s, int a, int capacity, AnchorReport* report) {
  const std::string where = "recompute anchor";
  const model::ModelConfig& tc = target.config();
  const int L = tc.n_layers, n = int(prefix.size());
  if (!(0 <= s && s <= a && a <= L))
    fail_field(where, "s, a", "0 <= s <= a <= " + std::to_string(L),
               "s = " + std::to_string(s) + ", a = " + std::to_string(a));
  if (n < 1) fail_field(where, "prefix", "at least one token", "0");
  if (src.n_pos < n) fail_field(where, "source cache positions", ">= " + std::to_string(n), std::to_string(src.n_pos));
  if (a > s && !mapper) fail(where, "layers [s, a) need a mapper (a > s)");
  if (mapper && s > mapper->shared_layers)
    fail_field(where, "s", "<= the verified shared layers " + std::to_string(mapper->shared_layers), std::to_string(s));
  if (s > 0 && (src.n_layers != tc.n_layers || src.n_kv_heads != tc.n_kv_heads || src.head_dim != tc.head_dim))
    fail_field(where, "source cache geometry", "the target's (shared layers)", "another");
  if (capacity < n) fail_field(where, "capacity", ">= " + std::to_string(n), std::to_string(capacity));

  model::KvCache dst = target.new_cache(capacity);
  // Layers [0, s) reused bit for bit, [s, a) mapped.
  if (mapper) {
    map_layers(*mapper, sc, tc, src, s, 0, a, dst);
  } else {
    dst.copy_prefix(src, n, 0, s);
  }
  if (a < L) {
    const int E = tc.n_embd;
    std::vector<float> x(size_t(n) * E);
    if (a == 0) {
      target.embed(prefix, x.data());
    } else if (a == s) {
      if (!source_residual) fail(where, "the source residual at the shared boundary is missing");
      if (sc.n_embd != E) fail_field(where, "n_embd", std::to_string(E), std::to_string(sc.n_embd));
      std::memcpy(x.data(), source_residual, x.size() * sizeof(float));
    } else {
      if (!source_residual) fail(where, "the source residual at the anchor is missing");
      const ResidualMap* rm = mapper->residual_at(a);
      if (!rm)
        fail_field(where, "residual map", "one at boundary " + std::to_string(a) + " (fit with --residual-maps)", "none");
      for (int t = 0; t < n; ++t) rm->map.apply(source_residual + size_t(t) * sc.n_embd, x.data() + size_t(t) * E);
    }
    if (a < L - 1) target.run_layers(a, L - 1, dst, 0, n, x.data());
    target.project_kv(L - 1, x.data(), n, 0, dst);
  }
  dst.n_pos = n;

  if (report) {
    report->s = s;
    report->a = a;
    report->n_layers = L;
    report->prefix = n;
    report->roles.clear();
    for (int l = 0; l < L; ++l)
      report->roles.push_back(l < s ? LayerRole::reused
                              : l < a ? LayerRole::mapped
                              : l < L - 1 ? LayerRole::recomputed
                                          : LayerRole::kv_projected);
    report->full_prefill_macs_per_token = L * layer_macs(tc);
    report->target_macs_per_token = a < L ? (L - 1 - a) * layer_macs(tc) + kv_projection_macs(tc) : 0.0;
    double mm = 0;
    if (a > s) mm += double(a - s) * tc.n_kv_heads * 2.0 * sc.head_dim * tc.head_dim;
    if (a > s && a < L) mm += double(sc.n_embd) * tc.n_embd;
    report->mapping_macs_per_token = mm;
  }
  return dst;
}

}  // namespace ember::map
