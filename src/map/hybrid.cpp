#include "map/hybrid.h"

#include "map/split.h"
#include "map/target_coords.h"
#include "util/error.h"

namespace ember::map {

HybridRun run_hybrid(model::Engine& source, model::Engine& target, const model::Model& source_model,
                     const model::Model& target_model, const Mapper* mapper, std::span<const int32_t> ids,
                     int anchor, const std::string& where) {
  HybridRun run;
  run.s = shared_layers(source_model.file(), source_model.config(), target_model.file(), target_model.config()).layers;
  const int L = target_model.config().n_layers;
  run.a = anchor < 0 ? run.s : anchor;
  if (run.a < run.s || run.a > L)
    fail_field(where, "--anchor", "in [s, L] = [" + std::to_string(run.s) + ", " + std::to_string(L) + "]",
               std::to_string(run.a));
  if (mapper) {
    if (mapper->source.identity != source_model.identity() || mapper->target.identity != target_model.identity())
      fail_field(where, "mapper identities", "this source and target", "another pair");
    if (mapper->shared_layers != run.s)
      fail_field(where, "mapper shared layers", std::to_string(run.s), std::to_string(mapper->shared_layers));
  }
  if (ids.size() < 2) fail_field(where, "--prompt", "at least 2 tokens (BOS included)", std::to_string(ids.size()));
  const int P = int(ids.size());
  run.prefix.assign(ids.begin(), ids.end() - 1);
  run.resume_token = ids.back();

  // The source prefills the prefix; its residual entering layer a is what the target resumes
  // from when 0 < a < L (anchor.h).
  std::vector<float> residual;
  model::ForwardHooks hooks;
  hooks.on_residual = [&](int boundary, int, int n, const float* x) {
    if (boundary == run.a) residual.assign(x, x + size_t(n) * source.config().n_embd);
  };
  model::KvCache source_cache = source.new_cache(P);
  source.forward(source_cache, run.prefix, &hooks);
  run.cache = anchor_handoff(target, source.config(), mapper, source_cache, run.prefix,
                             residual.empty() ? nullptr : residual.data(), run.s, run.a, P, &run.report);
  return run;
}

kv::KvState hybrid_mapped_state(const HybridRun& run, const model::Engine& target,
                                    const std::string& target_tokenizer_identity,
                                    const std::string& source_model_identity, const Mapper* mapper) {
  const int n = int(run.prefix.size());
  kv::KvState st;
  st.manifest = target_coordinates(target, target_tokenizer_identity);
  st.manifest.prefix.tokens = run.prefix;
  st.manifest.resume.token = run.resume_token;
  st.manifest.resume.position = n;
  st.cache = model::KvCache(run.cache.n_layers, run.cache.n_kv_heads, run.cache.head_dim, n);
  st.cache.n_pos = n;
  st.cache.copy_prefix(run.cache, n);
  kv::MappedProvenance mapping;
  mapping.kind = "hybrid";
  mapping.mapper_hash = mapper ? mapper->hash() : "";
  mapping.calibration_split_hash = mapper ? mapper->split_hash : "";
  mapping.shared_layers = run.s;
  mapping.anchor = run.a;
  mapping.layer_roles = layer_role_names(run.report);
  mapping.source_model_identity = source_model_identity;
  mapping.source_manifest_sha256 = "";  // the source state was computed here, not read
  mapping.source_prefix_sha256 = prompt_hash(run.prefix);
  st.provenance = std::move(mapping);
  return st;
}

std::vector<std::string> layer_role_names(const AnchorReport& report) {
  std::vector<std::string> out;
  for (LayerRole role : report.roles) out.push_back(layer_role_name(role));
  return out;
}

FullPrefillReference full_prefill_reference(model::Engine& target, std::span<const int32_t> ids, int n,
                                            const std::function<bool(int32_t)>& is_end_of_generation) {
  FullPrefillReference ref;
  model::KvCache cache = target.new_cache(int(ids.size()));
  std::vector<float> logits = target.forward(cache, ids);
  ref.first_logits = logits;
  for (int i = 0; i < n; ++i) {
    const int32_t id = first_argmax(logits.data(), int(logits.size()));
    ref.greedy.push_back(id);
    if (is_end_of_generation(id)) break;
    if (i + 1 < n) logits = target.forward(cache, std::span<const int32_t>(&id, 1));
  }
  return ref;
}

}  // namespace ember::map
