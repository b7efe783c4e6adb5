#include "map/apply.h"

#include <cstring>

#include "model/rope.h"
#include "util/error.h"
#include "util/f16.h"

namespace ember::map {

const char* layer_role_name(LayerRole r) {
  switch (r) {
    case LayerRole::reused: return "reused";
    case LayerRole::mapped: return "mapped";
    case LayerRole::recomputed: return "recomputed";
    case LayerRole::kv_projected: return "kv-projected";
  }
  return "?";
}

ModelGeometry geometry_of(const model::ModelConfig& c, const std::string& identity) {
  ModelGeometry g;
  g.identity = identity;
  g.arch = model::arch_name(c.arch);
  g.n_layers = c.n_layers;
  g.n_kv_heads = c.n_kv_heads;
  g.head_dim = c.head_dim;
  g.n_embd = c.n_embd;
  return g;
}

bool same_rope(const model::ModelConfig& a, const model::ModelConfig& b) {
  return a.rope_layout == b.rope_layout && a.rope_theta == b.rope_theta &&
         a.head_dim == b.head_dim && a.rope_scaling.type == b.rope_scaling.type &&
         a.rope_scaling.factor == b.rope_scaling.factor &&
         a.rope_scaling.original_context == b.rope_scaling.original_context &&
         a.rope_scaling.low_freq_factor == b.rope_scaling.low_freq_factor &&
         a.rope_scaling.high_freq_factor == b.rope_scaling.high_freq_factor;
}

void map_layers(const Mapper& m, const model::ModelConfig& sc, const model::ModelConfig& tc,
                const model::KvCache& src, int reuse_below, int first, int last,
                model::KvCache& dst) {
  const std::string where = "map apply";
  const ModelGeometry sg = geometry_of(sc, m.source.identity), tg = geometry_of(tc, m.target.identity);
  if (!sg.same_shape(m.source))
    fail_field(where, "source geometry", "the mapper's source geometry", "a different model geometry");
  if (!tg.same_shape(m.target))
    fail_field(where, "target geometry", "the mapper's target geometry", "a different model geometry");
  if (src.n_layers != sc.n_layers || src.n_kv_heads != sc.n_kv_heads || src.head_dim != sc.head_dim)
    fail_field(where, "source cache geometry", "the source model's", "another");
  if (dst.n_layers != tc.n_layers || dst.n_kv_heads != tc.n_kv_heads || dst.head_dim != tc.head_dim)
    fail_field(where, "target cache geometry", "the target model's", "another");
  if (dst.capacity < src.n_pos)
    fail_field(where, "target cache capacity", ">= " + std::to_string(src.n_pos), std::to_string(dst.capacity));
  if (first < 0 || last > tc.n_layers || first > last)
    fail_field(where, "layer range", "within [0, n_layers]", "[" + std::to_string(first) + ", " + std::to_string(last) + ")");
  if (reuse_below > m.shared_layers)
    fail_field(where, "reused layers", "<= the verified shared layers " + std::to_string(m.shared_layers),
               std::to_string(reuse_below));
  const int n = src.n_pos, ds = sc.head_dim, dt = tc.head_dim;
  const bool rope_same = same_rope(sc, tc);
  // cos/sin of every position, once: [n][d/2] for each side.
  model::RopeTable srope(sc), trope(tc);
  std::vector<float> cs(size_t(n) * (ds / 2)), ss(cs.size()), ct(size_t(n) * (dt / 2)), st(ct.size());
  for (int p = 0; p < n; ++p) {
    srope.cos_sin(p, cs.data() + size_t(p) * (ds / 2), ss.data() + size_t(p) * (ds / 2));
    trope.cos_sin(p, ct.data() + size_t(p) * (dt / 2), st.data() + size_t(p) * (dt / 2));
  }
  std::vector<float> x(static_cast<size_t>(ds)), y(static_cast<size_t>(dt));
  for (int l = first; l < last; ++l) {
    for (int h = 0; h < tc.n_kv_heads; ++h) {
      const bool reuse = l < reuse_below;
      const HeadMaps& hm = m.head(l, h);
      const bool copy_k = reuse || (rope_same && hm.k.is_identity());
      const bool copy_v = reuse || hm.v.is_identity();
      if (copy_k) std::memcpy(dst.k_row(l, h, 0), src.k_row(l, h, 0), size_t(n) * dt * 2);
      if (copy_v) std::memcpy(dst.v_row(l, h, 0), src.v_row(l, h, 0), size_t(n) * dt * 2);
      for (int p = 0; p < n; ++p) {
        if (!copy_k) {
          const uint16_t* kr = src.k_row(l, h, p);
          for (int i = 0; i < ds; ++i) x[size_t(i)] = f16_to_f32(kr[i]);
          srope.rotate(cs.data() + size_t(p) * (ds / 2), ss.data() + size_t(p) * (ds / 2), x.data(), /*inverse=*/true);
          hm.k.apply(x.data(), y.data());
          trope.rotate(ct.data() + size_t(p) * (dt / 2), st.data() + size_t(p) * (dt / 2), y.data(), /*inverse=*/false);
          uint16_t* out = dst.k_row(l, h, p);
          for (int i = 0; i < dt; ++i) out[i] = f32_to_f16(y[size_t(i)]);
        }
        if (!copy_v) {
          const uint16_t* vr = src.v_row(l, h, p);
          for (int i = 0; i < ds; ++i) x[size_t(i)] = f16_to_f32(vr[i]);
          hm.v.apply(x.data(), y.data());
          uint16_t* out = dst.v_row(l, h, p);
          for (int i = 0; i < dt; ++i) out[i] = f32_to_f16(y[size_t(i)]);
        }
      }
    }
  }
}

}  // namespace ember::map
