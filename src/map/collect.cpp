#include "map/collect.h"

#include <cstring>
#include <map>

#include "map/apply.h"
#include "util/error.h"
#include "util/progress.h"
#include "util/thread_pool.h"

namespace ember::map {

ModelRows capture_rows(model::Engine& engine, const std::vector<int32_t>& tokens) {
  const model::ModelConfig& c = engine.config();
  const int n = int(tokens.size()), G = c.n_kv_heads, D = c.head_dim, E = c.n_embd;
  ModelRows r;
  r.n_rows = n;
  r.k.assign(size_t(c.n_layers) * G * n * D, 0.f);
  r.v.assign(r.k.size(), 0.f);
  r.res.assign(size_t(c.n_layers + 1) * n * E, 0.f);
  model::ForwardHooks hooks;
  // k_pre, v: [rows][G][D] -> [layer][head][row][dim]
  hooks.on_kv = [&](int layer, int pos0, int cnt, const float* k_pre, const float*, const float* v) {
    for (int t = 0; t < cnt; ++t)
      for (int h = 0; h < G; ++h) {
        const size_t dst = ((size_t(layer) * G + h) * n + (pos0 + t)) * D;
        std::memcpy(r.k.data() + dst, k_pre + (size_t(t) * G + h) * D, size_t(D) * sizeof(float));
        std::memcpy(r.v.data() + dst, v + (size_t(t) * G + h) * D, size_t(D) * sizeof(float));
      }
  };
  hooks.on_residual = [&](int boundary, int pos0, int cnt, const float* x) {
    std::memcpy(r.res.data() + (size_t(boundary) * n + pos0) * E, x, size_t(cnt) * E * sizeof(float));
  };
  model::KvCache cache = engine.new_cache(n);
  engine.forward(cache, tokens, &hooks);
  return r;
}

CalibrationSet collect_calibration(model::Engine& source, const std::string& source_identity,
                                   model::Engine& target, const std::string& target_identity,
                                   const std::vector<std::vector<int32_t>>& prompts,
                                   const PromptSplit& split, const std::string& tokenizer_identity,
                                   int shared_layers, const CollectOptions& o) {
  const std::string where = "map collect";
  CalibrationSet set = CalibrationSet::empty(geometry_of(source.config(), source_identity),
                                             geometry_of(target.config(), target_identity), tokenizer_identity,
                                             shared_layers, split, o.residual);
  std::map<std::string, const std::vector<int32_t>*> by_hash;
  for (const auto& p : prompts) by_hash.emplace(prompt_hash(p), &p);
  // Every prompt of the split must be there before any model runs.
  for (const auto* part : {&split.calib, &split.eval})
    for (const auto& h : *part)
      if (by_hash.find(h) == by_hash.end()) fail_field(where, "prompt", "every prompt of the split", "missing " + h);
  std::unique_ptr<ThreadPool> pool;
  if (o.threads > 1) pool = std::make_unique<ThreadPool>(o.threads);
  Progress progress(o.progress_label, int64_t(split.calib.size() + split.eval.size()), "prompts");
  auto add = [&](const std::string& h, SplitPart part) {
    const std::vector<int32_t>& tokens = *by_hash.at(h);
    const ModelRows s = capture_rows(source, tokens), t = capture_rows(target, tokens);
    set.add_prompt(h, part, s, t, pool.get(), where);
    if (o.on_prompt) o.on_prompt(h, part, s, t);
    progress.step();
  };
  for (const auto& h : split.calib) add(h, SplitPart::calib);
  for (const auto& h : split.eval) add(h, SplitPart::eval);
  progress.finish();
  set.validate(where);
  return set;
}

}  // namespace ember::map
