#include "eval/pack_eval.h"

#include "contract/json_schema.h"
#include "model/generate.h"
#include "util/error.h"
#include "util/json_strict.h"
#include "util/sha256.h"

namespace ember::eval {

namespace {

using nlohmann::json;
using nlohmann::ordered_json;

struct Run {
  bool pass = false;
  size_t prompt_tokens = 0, generated_tokens = 0;
  std::string output;
};

// One greedy run from a fresh cache; the output is what `ember run` prints (StreamDecoder:
// valid UTF-8, every selected token, an end-of-generation token included).
Run run_one(model::Engine& engine, const tok::Tokenizer& tokenizer, const std::vector<int32_t>& prompt,
            int max_tokens, const ProbeCheck& check) {
  model::KvCache cache = engine.new_cache(int(prompt.size()));
  model::Sampler sampler(model::SamplingParams{});  // temperature 0: argmax, ties to the lowest id
  model::GenerateOptions opt;
  opt.max_steps = max_tokens;
  opt.is_eog = [&](int32_t id) { return tokenizer.is_eog(id); };
  tok::StreamDecoder stream(tokenizer);
  Run r;
  const model::GenerateResult g =
      model::generate(engine, cache, prompt, opt, sampler,
                      [&](int, std::span<const float>, int32_t token) { r.output += stream.push(token); });
  r.output += stream.flush();
  r.prompt_tokens = prompt.size();
  r.generated_tokens = g.tokens.size();
  r.pass = check.passes(r.output);
  return r;
}

ordered_json outcome(const Run& r) {
  ordered_json o;
  o["pass"] = r.pass;
  o["prompt_tokens"] = r.prompt_tokens;
  o["generated_tokens"] = r.generated_tokens;
  o["output"] = r.output;
  return o;
}

}  // namespace

std::vector<EvalProbe> checked_probes(const contract::PackReport& pack, std::vector<std::string>* skipped) {
  std::vector<EvalProbe> out;
  const json& probes = pack.pack.at("probes");
  for (size_t i = 0; i < probes.size(); ++i) {
    const json& p = probes[i];
    const std::string id = p.at("id").get<std::string>();
    const json& expect = p.at("expect");
    if (!expect.contains("check")) {
      if (skipped) skipped->push_back(id);
      continue;
    }
    const std::string where = pack.path + ": /probes/" + std::to_string(i) + " (" + id + ")";
    out.push_back({id, p.at("prompt").get<std::string>(), ProbeCheck::from_json(expect["check"], where)});
  }
  if (out.empty())
    fail_field(pack.path, "probes", "at least one probe with expect.check (exact, contains, regex or numeric)",
               "none (" + std::to_string(probes.size()) + " probes name only tool calls or contains lists)");
  return out;
}

PackEvalResult evaluate_pack(const std::string& pack_path, const contract::ToolAllowlist& allow,
                             model::Engine& engine, const tok::Tokenizer& tokenizer,
                             const PackEvalOptions& options) {
  if (options.max_tokens < 1 || options.max_tokens > 65536)
    fail_field("pack eval", "max_tokens", "1..65536", std::to_string(options.max_tokens));
  // The briefing's token cost as `ember pack validate --model` and `ember run --pack` count it:
  // plain text, no BOS of its own.
  const contract::TokenCounter count = [&tokenizer](std::string_view text) {
    return tokenizer.encode(text, false, false).size();
  };
  const contract::PackReport pack =
      contract::load_validated_pack(pack_path, allow, contract::PackLimits{}, &count);
  PackEvalResult result;
  const std::vector<EvalProbe> probes = checked_probes(pack, &result.skipped);

  // Every prompt encoded, and every run's positions checked, before the model runs at all.
  std::vector<std::vector<int32_t>> without, with;
  for (const EvalProbe& p : probes) {
    without.push_back(tokenizer.encode(p.prompt, options.add_bos));
    const std::string text = contract::inject_briefing(pack.briefing, p.prompt);
    with.push_back(tokenizer.encode_plain_prefix(text, text.size() - p.prompt.size(), options.add_bos));
    for (const auto* ids : {&without.back(), &with.back()}) {
      if (ids->empty()) fail_field(pack_path, "probe " + p.id + ": prompt", "at least one token", "none");
      for (int32_t id : *ids)
        if (id >= engine.config().n_vocab)
          fail_field(pack_path, "probe " + p.id + ": token id",
                     "below the model's vocabulary size " + std::to_string(engine.config().n_vocab), std::to_string(id));
      const int64_t positions = int64_t(ids->size()) + options.max_tokens - 1;
      if (positions > engine.position_limit())
        fail_field(pack_path, "probe " + p.id + ": positions",
                   "at most the engine's " + std::to_string(engine.position_limit()) + " (prompt " +
                       std::to_string(ids->size()) + " tokens + max_tokens " + std::to_string(options.max_tokens) +
                       " - 1)",
                   std::to_string(positions));
    }
  }

  ordered_json r;
  r["format"] = "ember.pack-eval-receipt.v1";
  r["model"]["identity"] = engine.model().identity();
  r["model"]["tokenizer_identity"] = tokenizer.identity();
  if (!options.model_name.empty()) r["model"]["name"] = options.model_name;
  r["pack"]["id"] = pack.pack["id"].get<std::string>();
  r["pack"]["sha256"] = pack.sha256;
  r["pack"]["probes_sha256"] = sha256_hex(canonical_json(pack.pack["probes"]));
  r["engine"]["fingerprint"] = engine.fingerprint();
  r["engine"]["numerics_contract"] = model::kNumericsContract;
  r["decoding"]["selection"] = "greedy-argmax";
  r["decoding"]["max_tokens"] = options.max_tokens;
  r["decoding"]["injection"] = "briefing-plain-text-blank-line-prompt";
  r["probes"] = ordered_json::array();
  size_t passed_without = 0, passed_with = 0, tokens_without = 0, tokens_with = 0;
  for (size_t i = 0; i < probes.size(); ++i) {
    const Run a = run_one(engine, tokenizer, without[i], options.max_tokens, probes[i].check);
    const Run b = run_one(engine, tokenizer, with[i], options.max_tokens, probes[i].check);
    passed_without += a.pass;
    passed_with += b.pass;
    tokens_without += a.prompt_tokens + a.generated_tokens;
    tokens_with += b.prompt_tokens + b.generated_tokens;
    ordered_json p;
    p["id"] = probes[i].id;
    p["prompt"] = probes[i].prompt;
    p["check"] = probes[i].check.to_json();
    p["without"] = outcome(a);
    p["with"] = outcome(b);
    r["probes"].push_back(std::move(p));
  }
  const double n = double(probes.size());
  const double score_without = double(passed_without) / n, score_with = double(passed_with) / n;
  ordered_json& t = r["totals"];
  t["n_probes"] = probes.size();
  t["passed_without"] = passed_without;
  t["passed_with"] = passed_with;
  t["score_without"] = score_without;
  t["score_with"] = score_with;
  t["difference"] = score_with - score_without;
  t["briefing_bytes"] = pack.briefing.size();
  t["briefing_tokens"] = *pack.briefing_tokens;
  t["tokens_without"] = tokens_without;
  t["tokens_with"] = tokens_with;

  const auto errors = contract::builtin_schema("pack-eval-receipt").validate(json::parse(r.dump()));
  if (!errors.empty()) fail(pack_path, "evaluation receipt does not satisfy its schema: " + errors.front());
  result.receipt = std::move(r);
  return result;
}

}  // namespace ember::eval
