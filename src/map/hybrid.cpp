#include "map/hybrid.h"

#include <cstdio>

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
  st.cache = run.cache.copy_rows(n);
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

std::string handoff_line(const HybridRun& run) {
  std::string line = "handoff s = " + std::to_string(run.s) + ", a = " + std::to_string(run.a) +
                     ", L = " + std::to_string(run.report.roles.size()) + ":";
  for (size_t l = 0; l < run.report.roles.size(); ++l)
    line += " " + std::to_string(l) + ":" + layer_role_name(run.report.roles[l]);
  char saved[96];
  std::snprintf(saved, sizeof saved, "; target prefill work saved %.1f%% (weight MACs)",
                100 * run.report.prefill_work_saved());
  return line + saved;
}

std::vector<int32_t> greedy_continue(model::Engine& engine, model::KvCache& cache, std::vector<float> logits, int n,
                                     const std::function<bool(int32_t)>& is_end_of_generation,
                                     const std::function<void(int32_t)>& on_token) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) {
    const int32_t id = first_argmax(logits.data(), int(logits.size()));
    ids.push_back(id);
    if (on_token) on_token(id);
    if (is_end_of_generation(id)) break;
    if (i + 1 < n) logits = engine.forward(cache, std::span<const int32_t>(&id, 1));
  }
  return ids;
}

FullPrefillReference full_prefill_reference(model::Engine& target, std::span<const int32_t> ids, int n,
                                            const std::function<bool(int32_t)>& is_end_of_generation) {
  FullPrefillReference ref;
  model::KvCache cache = target.new_cache(int(ids.size()));
  ref.first_logits = target.forward(cache, ids);
  ref.greedy = greedy_continue(target, cache, ref.first_logits, n, is_end_of_generation);
  return ref;
}

HybridOutcome hybrid_handoff(model::Engine& source, model::Engine& target, const model::Model& source_model,
                             const model::Model& target_model, const Mapper* mapper, std::span<const int32_t> ids,
                             const HybridOptions& o, const std::string& where) {
  EMBER_CHECK(o.is_end_of_generation);
  HybridOutcome out;
  out.run = run_hybrid(source, target, source_model, target_model, mapper, ids, o.anchor, where);
  if (o.on_handoff) o.on_handoff(out.run);
  out.first_logits = target.forward(out.run.cache, std::span<const int32_t>(&out.run.resume_token, 1));
  out.generated = greedy_continue(target, out.run.cache, out.first_logits, o.n, o.is_end_of_generation, o.on_token);
  if (o.check) {
    const FullPrefillReference ref = full_prefill_reference(target, ids, o.n, o.is_end_of_generation);
    HybridCheck c;
    c.first = compare_logits(out.first_logits.data(), ref.first_logits.data(), int(ref.first_logits.size()));
    c.same_greedy = ref.greedy == out.generated;
    c.exact_hybrid_differs = out.run.a == out.run.s && !(c.first.bit_identical && c.same_greedy);
    out.check = c;
  }
  return out;
}

nlohmann::json HybridOutcome::report(const std::string& source_identity, const std::string& target_identity,
                                     const Mapper* mapper) const {
  nlohmann::json j = {{"source", source_identity}, {"target", target_identity},
                      {"shared_layers", run.s},    {"anchor", run.a},
                      {"handoff", run.report.to_json()}, {"mapper_hash", mapper ? mapper->hash() : ""},
                      {"generated", generated}};
  if (check)
    j["check"] = {{"first_logits_bit_identical", check->first.bit_identical}, {"rel_logit_error", check->first.rel_l2},
                  {"same_next_token", check->first.same_argmax}, {"greedy_identical", check->same_greedy}};
  return j;
}

}  // namespace ember::map
