#include "kv/replay.h"

#include "kv/import.h"
#include "model/generate.h"
#include "util/error.h"

namespace ember::kv {
namespace {

Continuation run_loop(model::Engine& engine, model::KvCache& cache, std::span<const int32_t> input,
                      const ContinueOptions& o) {
  if (o.steps < 1) fail_field("generation", "steps", ">= 1", std::to_string(o.steps));
  model::GenerateOptions g;
  g.max_steps = o.steps;
  g.is_eog = o.is_eog;
  model::Sampler greedy(model::SamplingParams{});
  Continuation c;
  const model::GenerateResult r = model::generate(
      engine, cache, input, g, greedy, [&](int, std::span<const float> logits, int32_t) {
        if (o.keep_logits) c.logits.insert(c.logits.end(), logits.begin(), logits.end());
      });
  c.tokens = r.tokens;
  c.stopped_at_eog = r.stopped_at_eog;
  return c;
}

}  // namespace

ExportResult export_prefix(model::Engine& engine, const std::string& tokenizer_identity,
                           std::span<const int32_t> prefix, const std::string& producer, int witness) {
  if (prefix.empty()) fail_field("export", "prefix", "at least one token", "none");
  if (prefix.size() > size_t(kMaxPositions))
    fail_field("export", "prefix", "at most " + std::to_string(kMaxPositions) + " tokens",
               std::to_string(prefix.size()));
  const int P = int(prefix.size());
  // Exactly P positions: the generation loop evaluates the prefix, selects the resume token
  // from the boundary logits and (max_steps = 1) never evaluates it.
  model::KvCache cache = engine.new_cache(P);
  ContinueOptions o;
  o.steps = 1;
  o.keep_logits = true;
  Continuation c = run_loop(engine, cache, prefix, o);
  EMBER_CHECK(c.tokens.size() == 1 && cache.n_pos == P);
  VerifiedState s = seal_prefill(engine, tokenizer_identity, prefix, std::move(cache), c.logits, producer, witness,
                                 "export");
  EMBER_CHECK(s.manifest().resume.token == c.tokens[0]);
  return {std::move(s), std::move(c.logits)};
}

VerifiedState seal_prefill(model::Engine& engine, const std::string& tokenizer_identity,
                           std::span<const int32_t> prefix, model::KvCache cache,
                           std::span<const float> boundary_logits, const std::string& producer, int witness,
                           const std::string& where) {
  const int P = int(prefix.size());
  const int vocab = engine.config().n_vocab;
  EMBER_CHECK(P >= 1 && cache.n_pos == P && boundary_logits.size() == size_t(vocab));
  KvState s;
  s.manifest = describe_target(engine, tokenizer_identity);
  s.manifest.producer = producer;
  s.manifest.prefix.tokens.assign(prefix.begin(), prefix.end());
  s.manifest.resume.token = model::argmax(boundary_logits.data(), vocab);
  s.manifest.resume.position = P;
  // Only an engine with allow_past_context gets here with P > n_ctx; the manifest says so.
  s.manifest.past_context = P > engine.config().n_ctx;
  // The proof that `kv verify --spot` re-derives: the logits after the last prefix position,
  // and what continuing from the cache computes (W decode steps past it, on a copy).
  s.manifest.proof.boundary_logits_sha256 = logits_hash(boundary_logits);
  Witness w = record_witness(engine, cache, s.manifest.resume.token, witness);
  s.manifest.proof.witness_tokens = std::move(w.tokens);
  s.manifest.proof.witness_logits_sha256 = std::move(w.logits_sha256);
  s.manifest.proof.witness_attention_sha256 = std::move(w.attention_sha256);
  s.cache = std::move(cache);
  return seal(std::move(s), where);
}

Continuation replay(const VerifiedState& snapshot, model::Engine& engine,
                    const std::string& tokenizer_identity, const ContinueOptions& options) {
  if (options.steps < 1) fail_field("replay", "steps", ">= 1", std::to_string(options.steps));
  // Every check passes before anything is decoded. The positions written are P (the resume
  // token) through P + steps - 1: all below the engine's limit (the model's context length
  // unless it allows going past it).
  const int64_t P = snapshot.manifest().geometry.positions, limit = engine.position_limit();
  if (P + 1 > limit)
    fail_field(options.where, "geometry.positions",
               "at most " + std::to_string(limit - 1) + " (the target's position limit " +
                   std::to_string(limit) + " less the resume token; --allow-past-context to go "
                   "past the model's context length)",
               std::to_string(P));
  if (P + options.steps > limit)
    fail_field(options.where, "steps",
               "at most " + std::to_string(limit - P) + " (" + std::to_string(P) +
                   " cached positions + steps = the position limit " + std::to_string(limit) + ")",
               std::to_string(options.steps));
  // The cache holds P positions and grows as the continuation fills it.
  model::KvCache cache =
      import_for_model(snapshot, engine, tokenizer_identity, 0, options.where, options.allow_foreign);
  const int32_t resume = snapshot.manifest().resume.token;
  EMBER_CHECK(cache.n_pos == snapshot.manifest().resume.position);
  return run_loop(engine, cache, std::span<const int32_t>(&resume, 1), options);
}

Continuation generate_native(model::Engine& engine, std::span<const int32_t> prompt,
                             const ContinueOptions& options) {
  if (prompt.empty() || prompt.size() > size_t(model::kMaxCachePositions))
    fail_field("generation", "prompt tokens", "1..2^24", std::to_string(prompt.size()));
  model::KvCache cache = engine.new_cache(int(prompt.size()));
  return run_loop(engine, cache, prompt, options);
}

}  // namespace ember::kv
