#include "map/study_anchor.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>

#include "gguf/gguf_file.h"
#include "gguf/synth.h"
#include "gguf/writer.h"
#include "map/anchor.h"
#include "map/collect.h"
#include "map/mapper.h"
#include "map/metrics.h"
#include "map/shared.h"
#include "model/engine.h"
#include "model/rope.h"
#include "util/error.h"
#include "util/f16.h"
#include "util/progress.h"

namespace ember::map {

void MethodStats::add(bool agreed, double rel_err, double kl) {
  agree += agreed ? 1 : 0;
  ++comparisons;
  sum_rel_err += rel_err;
  if (rel_err > max_rel_err) max_rel_err = rel_err;
  sum_kl += kl;
  if (!(kl <= max_kl)) max_kl = kl;  // a NaN propagates
}

void MethodStats::merge(const MethodStats& o) {
  agree += o.agree;
  comparisons += o.comparisons;
  sum_rel_err += o.sum_rel_err;
  if (o.max_rel_err > max_rel_err) max_rel_err = o.max_rel_err;
  sum_kl += o.sum_kl;
  if (!(o.max_kl <= max_kl)) max_kl = o.max_kl;
}

nlohmann::json MethodStats::to_json() const {
  return {{"agreement", comparisons ? double(agree) / double(comparisons) : 0.0},
          {"agree", agree},
          {"comparisons", comparisons},
          {"mean_rel_logit_error", mean_rel_err()},
          {"max_rel_logit_error", max_rel_err},
          {"mean_kl", mean_kl()},
          {"max_kl", max_kl}};
}

namespace {

// Copies `source` into a new file with layers [1, L) and the LM head perturbed (study header).
void write_perturbed_target(const std::string& source_path, const std::string& target_path,
                            int n_layers, double alpha, uint64_t seed) {
  const gguf::GgufFile src = gguf::GgufFile::open(source_path);
  gguf::GgufWriter w;
  w.copy_metadata(src);
  w.set_string("general.name", "ember-study-target-s" + std::to_string(seed));
  Rng rng(seed ^ 0x9e3779b97f4a7c15ull);
  for (const auto& t : src.tensors()) {
    if (t.type != gguf::TensorType::F32) fail_field(source_path, t.name, "F32", gguf::type_name(uint32_t(t.type)));
    std::vector<uint8_t> bytes(t.data, t.data + t.n_bytes);
    bool perturb = t.name == "output.weight";
    for (int l = 1; l < n_layers; ++l)
      if (t.name.rfind("blk." + std::to_string(l) + ".", 0) == 0) perturb = true;
    if (perturb) {
      const size_t n = t.n_bytes / 4;
      std::vector<float> v(n);
      std::memcpy(v.data(), bytes.data(), t.n_bytes);
      double mean = 0, var = 0;
      for (float x : v) mean += x;
      mean /= double(n);
      for (float x : v) var += (x - mean) * (x - mean);
      const double sd = std::sqrt(var / double(n));
      for (float& x : v) x = float(double(x) + alpha * sd * rng.normal());
      std::memcpy(bytes.data(), v.data(), t.n_bytes);
    }
    w.add_tensor(t.name, t.shape, t.type, std::move(bytes));
  }
  w.write_file(target_path, true);
}

std::vector<std::vector<int32_t>> random_prompts(Rng& rng, int count, int min_len, int max_len,
                                                 int vocab, std::set<std::string>& seen) {
  std::vector<std::vector<int32_t>> out;
  while (int(out.size()) < count) {
    const int len = min_len + int(rng.below(uint64_t(max_len - min_len + 1)));
    std::vector<int32_t> p(static_cast<size_t>(len));
    for (auto& t : p) t = int32_t(rng.below(uint64_t(vocab)));
    if (seen.insert(prompt_hash(p)).second) out.push_back(std::move(p));
  }
  return out;
}

double mean_eval_r2(const Mapper& m, bool keys) {
  double s = 0;
  int n = 0;
  for (int l = m.shared_layers; l < m.target.n_layers; ++l)
    for (int h = 0; h < m.target.n_kv_heads; ++h) {
      const HeadMaps& hm = m.head(l, h);
      s += keys ? hm.k_r2_eval : hm.v_r2_eval;
      ++n;
    }
  return n ? s / n : 0.0;
}


// The seed's mapper shape, for comparison: one affine map per layer over all KV heads
// jointly, (G*D) -> (G*D), for K (pre-RoPE) and for V. Not part of the mapper artifact (which
// is per head, as the issue specifies); used only to explain the difference to seed 001.
struct JointMaps {
  std::vector<LinearMap> k, v;  // [layer]; layers < s unused
};

// The joint statistics, fed prompt by prompt from collect_calibration's rows (calibration
// prompts only: collect's gate has already checked them against the split).
struct JointStats {
  int s = 0, G = 0, D = 0;
  std::vector<NormalEquations> k, v;  // [layer - s]
  JointStats(int shared, int L, int g, int d) : s(shared), G(g), D(d) {
    for (int l = shared; l < L; ++l) {
      k.emplace_back(G * D, G * D);
      v.emplace_back(G * D, G * D);
    }
  }
  void add(const ModelRows& src, const ModelRows& tgt) {
    const int n = src.n_rows;
    std::vector<float> xs(size_t(n) * G * D), ys(xs.size());
    for (size_t li = 0; li < k.size(); ++li) {
      const int l = s + int(li);
      for (int part = 0; part < 2; ++part) {
        for (int h = 0; h < G; ++h) {
          const size_t at = (size_t(l) * G + h) * n * D;
          const float* sx = (part == 0 ? src.k : src.v).data() + at;
          const float* ty = (part == 0 ? tgt.k : tgt.v).data() + at;
          for (int r = 0; r < n; ++r)
            for (int d = 0; d < D; ++d) {
              xs[(size_t(r) * G + h) * D + d] = sx[size_t(r) * D + d];
              ys[(size_t(r) * G + h) * D + d] = ty[size_t(r) * D + d];
            }
        }
        (part == 0 ? k : v)[li].add(xs.data(), ys.data(), n);
      }
    }
  }
  JointMaps solve(int L, double lambda) const {
    JointMaps jm;
    jm.k.resize(size_t(L));
    jm.v.resize(size_t(L));
    FitOptions fo;
    fo.lambda = lambda;
    fo.affine = true;
    for (size_t li = 0; li < k.size(); ++li) {
      jm.k[size_t(s) + li] = k[li].solve(fo, "study joint fit");
      jm.v[size_t(s) + li] = v[li].solve(fo, "study joint fit");
    }
    return jm;
  }
};

// Target cache: layers < s reused, layers >= s mapped with the joint maps (same RoPE both sides).
model::KvCache apply_joint(const JointMaps& jm, const model::ModelConfig& c, const model::KvCache& src, int s, int cap) {
  const int L = c.n_layers, G = c.n_kv_heads, D = c.head_dim, n = src.n_pos;
  model::KvCache dst(L, G, D, cap);
  model::RopeTable rope(c);
  std::vector<float> cs(static_cast<size_t>(D / 2)), sn(cs.size()), x(size_t(G) * D), y(x.size());
  dst.copy_prefix(src, n, 0, s);  // the reused layers
  for (int l = s; l < L; ++l)
    for (int p = 0; p < n; ++p) {
      rope.cos_sin(p, cs.data(), sn.data());
      for (int part = 0; part < 2; ++part) {
        for (int h = 0; h < G; ++h) {
          const uint16_t* row = part == 0 ? src.k_row(l, h, p) : src.v_row(l, h, p);
          float* xh = x.data() + size_t(h) * D;
          for (int d = 0; d < D; ++d) xh[d] = f16_to_f32(row[d]);
          if (part == 0) rope.rotate(cs.data(), sn.data(), xh, true);
        }
        (part == 0 ? jm.k : jm.v)[size_t(l)].apply(x.data(), y.data());
        for (int h = 0; h < G; ++h) {
          float* yh = y.data() + size_t(h) * D;
          if (part == 0) rope.rotate(cs.data(), sn.data(), yh, false);
          uint16_t* out = part == 0 ? dst.k_row(l, h, p) : dst.v_row(l, h, p);
          for (int d = 0; d < D; ++d) out[d] = f32_to_f16(yh[d]);
        }
      }
    }
  dst.n_pos = n;
  return dst;
}

}  // namespace

AnchorStudyResult run_anchor_study(const AnchorStudyOptions& o) {
  const std::string where = "study recompute-anchor";
  if (o.work_dir.empty()) fail(where, "no work directory");
  if (o.seeds < 1 || o.fit_prompts < 1 || o.eval_prompts < 1)
    fail_field(where, "sizes", "seeds, fit and eval prompts >= 1", "a zero count");
  if (o.layers < 2) fail_field(where, "layers", ">= 2", std::to_string(o.layers));
  AnchorStudyResult res;
  res.options = o;
  res.overall.assign(kAnchorMethodCount, MethodStats{});
  const int s = 1;  // embeddings and layer 0 shared
  for (int si = 0; si < o.seeds; ++si) {
    const uint64_t seed = o.first_seed + uint64_t(si);
    res.seeds.push_back(seed);
    const std::string src_path = o.work_dir + "/source-s" + std::to_string(seed) + ".gguf";
    const std::string tgt_path = o.work_dir + "/target-s" + std::to_string(seed) + ".gguf";
    gguf::SynthSpec spec;
    spec.arch = "llama";
    spec.layers = o.layers;
    spec.hidden = o.hidden;
    spec.heads = o.heads;
    spec.kv_heads = o.kv_heads;
    spec.ffn = o.ffn;
    spec.vocab = o.vocab;
    spec.context = 256;
    spec.tied = false;
    spec.seed = seed;
    spec.ffn_activation = o.activation;
    spec.norm = o.norm;
    gguf::synth_model(gguf::resolve_synth_spec(spec)).write_file(src_path, true);
    write_perturbed_target(src_path, tgt_path, o.layers, o.alpha, seed);

    auto src_model = model::Model::load(src_path);
    auto tgt_model = model::Model::load(tgt_path);
    const SharedLayers shared = shared_layers(src_model->file(), src_model->config(),
                                              tgt_model->file(), tgt_model->config());
    require_shared(shared, s, where);
    if (shared.layers != s)
      fail_field(where, "shared layers", std::to_string(s), std::to_string(shared.layers));
    model::Engine src(src_model, {}), tgt(tgt_model, {});
    const int L = tgt.config().n_layers;

    Rng rng(seed * 7919 + 13);
    std::set<std::string> seen;
    auto prompts = random_prompts(rng, o.fit_prompts + o.eval_prompts, o.min_len, o.max_len,
                                  o.vocab, seen);
    std::vector<std::string> hashes;
    for (const auto& p : prompts) hashes.push_back(prompt_hash(p));
    const PromptSplit split = PromptSplit::make(hashes, o.fit_prompts, o.eval_prompts, seed);
    JointStats joint_stats(s, tgt.config().n_layers, tgt.config().n_kv_heads, tgt.config().head_dim);
    CollectOptions co;
    co.residual = false;  // the study's anchors are a = s and a = L only
    co.progress_label = "study seed " + std::to_string(seed) + " collect";
    co.on_prompt = [&](const std::string&, SplitPart part, const ModelRows& sr, const ModelRows& tr) {
      if (part == SplitPart::calib) joint_stats.add(sr, tr);
    };
    const CalibrationSet calib = collect_calibration(src, src_model->identity(), tgt,
                                                     tgt_model->identity(), prompts, split,
                                                     "study-random-ids", s, co);
    MapperOptions affine_o;
    affine_o.kind = MapperKind::affine;
    affine_o.lambda = o.lambda_affine;
    affine_o.progress_label = "study seed " + std::to_string(seed) + " fit";
    MapperOptions anchor_o = affine_o;
    anchor_o.lambda = o.lambda_anchor;
    anchor_o.anchor_identity = true;
    const Mapper identity = identity_mapper(calib.source, calib.target, calib.tokenizer_identity, s);
    const Mapper affine = fit_mapper(calib, affine_o);
    const Mapper ridge_l2 = fit_mapper(calib, anchor_o);
    const JointMaps joint = joint_stats.solve(L, o.lambda_affine);

    std::vector<MethodStats> stats(kAnchorMethodCount);
    std::map<std::string, const std::vector<int32_t>*> by_hash;
    for (const auto& p : prompts) by_hash[prompt_hash(p)] = &p;
    Progress progress("study seed " + std::to_string(seed) + " eval", int64_t(split.eval.size()), "prompts");
    for (const std::string& h : split.eval) {
      const std::vector<int32_t>& p = *by_hash.at(h);
      const int P = int(p.size());
      // The reference: the target's own full prefill of all P tokens.
      model::KvCache ref_cache = tgt.new_cache(P);
      const std::vector<float> ref = tgt.forward(ref_cache, p);
      // The source prefills the prefix and exports its cache and residual at boundary s.
      const std::span<const int32_t> prefix(p.data(), size_t(P - 1));
      std::vector<float> residual;
      model::ForwardHooks hooks;
      hooks.on_residual = [&](int b, int, int n, const float* x) {
        if (b == s) residual.assign(x, x + size_t(n) * src.config().n_embd);
      };
      model::KvCache src_cache = src.new_cache(P - 1);
      src.forward(src_cache, prefix, &hooks);
      const int32_t last = p[size_t(P - 1)];
      auto decode = [&](const Mapper* m, int a) {
        model::KvCache c = anchor_handoff(tgt, src.config(), m, src_cache, prefix,
                                          residual.data(), s, a, P);
        return tgt.forward(c, std::span<const int32_t>(&last, 1));
      };
      model::KvCache jc = apply_joint(joint, tgt.config(), src_cache, s, P);
      const std::vector<float> outs[kAnchorMethodCount] = {
          decode(&identity, L), decode(&affine, L), decode(&ridge_l2, L), decode(nullptr, s),
          tgt.forward(jc, std::span<const int32_t>(&last, 1))};
      for (int mi = 0; mi < kAnchorMethodCount; ++mi) {
        const LogitComparison cmp = compare_logits(outs[mi].data(), ref.data(), int(ref.size()));
        stats[size_t(mi)].add(cmp.same_argmax, cmp.rel_l2, cmp.kl);
      }
      progress.step();
    }
    progress.finish();
    for (int mi = 0; mi < kAnchorMethodCount; ++mi) res.overall[size_t(mi)].merge(stats[size_t(mi)]);
    res.per_seed.push_back(stats);
    res.seed_details.push_back(
        {{"source_identity", src_model->identity()},
         {"target_identity", tgt_model->identity()},
         {"shared_layers", shared.layers},
         {"calibration_split_hash", split.hash()},
         {"mapper_hashes", {{"identity", identity.hash()}, {"affine", affine.hash()}, {"ridge_l2", ridge_l2.hash()}}},
         {"mean_eval_r2_mapped_layers",
          {{"affine", {{"k", mean_eval_r2(affine, true)}, {"v", mean_eval_r2(affine, false)}}},
           {"ridge_l2", {{"k", mean_eval_r2(ridge_l2, true)}, {"v", mean_eval_r2(ridge_l2, false)}}}}}});
  }
  return res;
}

nlohmann::json AnchorStudyResult::to_json() const {
  const AnchorStudyOptions& o = options;
  nlohmann::json j;
  j["study"] = "recompute-anchor";
  j["config"] = {{"seeds", o.seeds}, {"first_seed", o.first_seed}, {"fit_prompts", o.fit_prompts},
                 {"eval_prompts", o.eval_prompts}, {"layers", o.layers}, {"hidden", o.hidden},
                 {"heads", o.heads}, {"kv_heads", o.kv_heads}, {"ffn", o.ffn}, {"vocab", o.vocab},
                 {"alpha", o.alpha}, {"prompt_length", {o.min_len, o.max_len}},
                 {"lambda_affine", o.lambda_affine}, {"lambda_anchor", o.lambda_anchor},
                 {"shared_layers", 1}, {"hybrid_anchor", 1}, {"decode", "one-token"},
                 {"activation", o.activation}, {"norm", o.norm},
                 {"architecture", "llama (" + std::string(o.norm == "layernorm" ? "LayerNorm" : "RMSNorm") + ", RoPE, " +
                                      (o.activation == "gelu" ? "GELU" : "SwiGLU") + " MLP), untied LM head"},
                 {"numerics_contract", "canonical-v1"}};
  nlohmann::json methods;
  for (size_t mi = 0; mi < kAnchorMethodCount; ++mi) methods[kAnchorMethods[mi]] = overall[mi].to_json();
  j["methods"] = methods;
  nlohmann::json ps = nlohmann::json::array();
  for (size_t si = 0; si < per_seed.size(); ++si) {
    nlohmann::json e = seed_details[si];
    e["seed"] = seeds[si];
    nlohmann::json m;
    for (size_t mi = 0; mi < kAnchorMethodCount; ++mi) m[kAnchorMethods[mi]] = per_seed[si][mi].to_json();
    e["methods"] = m;
    ps.push_back(e);
  }
  j["per_seed"] = ps;
  return j;
}

std::string AnchorStudyResult::table() const {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%-13s %12s %14s %22s %20s %12s %12s\n", "method", "agreement",
                "comparisons", "mean rel logit error", "max rel logit error", "mean KL", "max KL");
  out += line;
  for (size_t mi = 0; mi < kAnchorMethodCount; ++mi) {
    const MethodStats& m = overall[mi];
    std::snprintf(line, sizeof line, "%-13s %6lld/%-5lld %14lld %21.6e%% %19.6e%% %12.4e %12.4e\n",
                  kAnchorMethods[mi], (long long)m.agree, (long long)m.comparisons,
                  (long long)m.comparisons, 100.0 * m.mean_rel_err(), 100.0 * m.max_rel_err,
                  m.mean_kl(), m.max_kl);
    out += line;
  }
  out += "\nper seed (agreement / mean rel logit error):\n";
  std::snprintf(line, sizeof line, "%-6s", "seed");
  out += line;
  for (size_t mi = 0; mi < kAnchorMethodCount; ++mi) {
    std::snprintf(line, sizeof line, " %24s", kAnchorMethods[mi]);
    out += line;
  }
  out += "\n";
  for (size_t si = 0; si < per_seed.size(); ++si) {
    std::snprintf(line, sizeof line, "%-6llu", (unsigned long long)seeds[si]);
    out += line;
    for (size_t mi = 0; mi < kAnchorMethodCount; ++mi) {
      const MethodStats& m = per_seed[si][mi];
      std::snprintf(line, sizeof line, " %5lld/%-4lld %12.4e%%", (long long)m.agree,
                    (long long)m.comparisons, 100.0 * m.mean_rel_err());
      out += line;
    }
    out += "\n";
  }
  return out;
}

}  // namespace ember::map
