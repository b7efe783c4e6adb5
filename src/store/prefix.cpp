#include "store/prefix.h"

#include <algorithm>

#include "kv/import.h"
#include "kv/replay.h"
#include "model/generate.h"
#include "util/error.h"

namespace ember::store {

PrefixRestore restore_longest_prefix(Store& store, const model::Engine& engine, const std::string& tokenizer_identity,
                                     std::span<const int32_t> prompt, OnBadState on_bad_state) {
  if (prompt.empty()) fail_field("prefix restore", "prompt", "at least one token", "none");
  const kv::SnapshotManifest target = kv::describe_target(engine, tokenizer_identity);
  const std::string ns = namespace_of(target);
  const size_t usable = prompt.size() - 1;
  PrefixRestore out;
  const std::vector<std::string> chain = prefix_chain(ns, prompt.first(usable));
  for (size_t b = chain.size(); b >= 1; --b) {
    const std::optional<std::string> seal = store.prefix_lookup(ns, chain[b - 1]);
    if (!seal) continue;
    try {
      // Read with room for the whole prompt, so the verified cache becomes the engine's
      // cache without a copy (read once, hashed once: kv::read_payloads).
      kv::VerifiedState s = store.get(*seal, /*count_hit=*/true, ns, int(prompt.size()));
      const std::vector<int32_t>& t = s.manifest().prefix.tokens;
      size_t common = 0;
      while (common < usable && common < t.size() && t[common] == prompt[common]) ++common;
      if (common < b * kPrefixBlock)
        fail_field(store.uri() + ": " + KeyLayout::prefix(ns, chain[b - 1]), "prefix",
                   "a state whose tokens begin with the prompt's first " + std::to_string(b * kPrefixBlock),
                   "state " + *seal + " sharing " + std::to_string(common));
      out.cache = kv::import_checked(std::move(s), target, 0, store.uri() + ": state " + *seal);
      // Positions past the common prefix are left in place and overwritten as the rest of
      // the prompt is computed (the cursor says what is valid).
      out.cache.n_pos = int(common);
      out.restored = int(common);
      out.seal = *seal;
      out.report = "store hit: restored " + std::to_string(common) + " of " + std::to_string(prompt.size()) +
                   " prompt positions from state " + *seal + "; computing " +
                   std::to_string(prompt.size() - common);
      for (const std::string& w : store.take_warnings()) out.report += "; " + w;
      return out;
    } catch (const Error& e) {
      if (on_bad_state != OnBadState::recompute) throw;
      out.report = std::string("stored state refused (recomputing the whole prompt, --on-bad-state recompute): ") + e.what();
      out.cache = engine.new_cache(int(prompt.size()));
      return out;
    }
  }
  out.cache = engine.new_cache(int(prompt.size()));
  out.report = "store miss: no stored prefix of the prompt's " + std::to_string(chain.size()) + " full " +
               std::to_string(kPrefixBlock) + "-token blocks; computing " + std::to_string(prompt.size());
  return out;
}

PutResult save_prefill(Store& store, model::Engine& engine, const std::string& tokenizer_identity,
                       std::span<const int32_t> prompt, const model::KvCache& cache,
                       std::span<const float> boundary_logits, const std::string& producer,
                       const PutOptions& options, int witness) {
  const int L = int(prompt.size());
  EMBER_CHECK(L >= 1 && cache.n_pos >= L);
  model::KvCache rows = cache.copy_rows(L);
  // kv export's state, witness included: one prompt, one seal.
  return store.put(kv::seal_prefill(engine, tokenizer_identity, prompt, std::move(rows), boundary_logits, producer,
                                    witness, "store save"),
                   options);
}

StoreRun run_with_store(model::Engine& engine, const std::string& tokenizer_identity, std::span<const int32_t> prompt,
                        const StoreRunOptions& o) {
  if (o.steps < 1) fail_field("generation", "steps", ">= 1", std::to_string(o.steps));
  if (prompt.empty()) fail_field("generation", "prompt tokens", "at least one", "none");
  StoreRun r;
  model::KvCache cache;
  if (o.from) {
    PrefixRestore p = restore_longest_prefix(*o.from, engine, tokenizer_identity, prompt, o.on_bad_state);
    cache = std::move(p.cache);
    r.restored = p.restored;
    r.report = p.report;
  } else {
    cache = engine.new_cache(int(prompt.size()));
  }
  model::GenerateOptions g;
  g.max_steps = o.steps;
  g.is_eog = o.is_eog;
  model::Sampler greedy(model::SamplingParams{});
  std::vector<float> boundary;
  const model::GenerateResult gr = model::generate(
      engine, cache, prompt.subspan(size_t(r.restored)), g, greedy,
      [&](int step, std::span<const float> logits, int32_t) {
        if (step == 0) boundary.assign(logits.begin(), logits.end());
        if (o.keep_logits) r.logits.insert(r.logits.end(), logits.begin(), logits.end());
      });
  r.tokens = gr.tokens;
  r.stopped_at_eog = gr.stopped_at_eog;
  if (o.save_to)
    r.saved = save_prefill(*o.save_to, engine, tokenizer_identity, prompt, cache, boundary, o.producer, o.save);
  return r;
}

}  // namespace ember::store
