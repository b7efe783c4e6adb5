// ember run: generate text (or token ids) with the engine, optionally dumping every selection
// step's logits in the layout of ../shared/models/reference/ (docs/cli-run.md).
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/limits.h"
#include "cli/model_loader.h"
#include "cli/pack_tokens.h"
#include "cli/prompt_input.h"
#include "cli/prompt_text.h"
#include "cli/store_flags.h"
#include "cli/token_ids.h"
#include "gguf/gguf_file.h"
#include "model/engine.h"
#include "model/generate.h"
#include "store/prefix.h"
#include "tokenizer/tokenizer.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/printable.h"

namespace ember::cli {

namespace {

struct RunArgs {
  std::string model, tokenizer, dump_logits;
  PromptInput p;  // --prompt, --prompt-file, --messages, --prompt-ids (cli/prompt_input.h)
  std::string pack, allow;  // --pack: DOMCAP1 capability pack, checked against --allow
  int n = 64;
  int threads = 0;
  float temp = 0.0f, top_p = 1.0f;
  int top_k = 0;
  uint64_t seed = 0;
  bool ignore_eos = false, force = false, quiet = false;
  bool allow_past_context = false;
  // --store / --save-to (docs/store.md): restore the longest stored prefix, store the prefill.
  std::string store, save_to, on_bad_state = "fail", password_file;
};

void run(const RunArgs& a) {
  if (!a.dump_logits.empty())
    for (const std::string& out : {a.dump_logits, a.dump_logits + ".tokens"})
      refuse_output_is_input(out, {a.model, a.tokenizer, a.pack, a.p.file, a.p.messages, a.p.chat.tokenizer_config});
  LoadedModel loaded = load_model({a.model, a.tokenizer, ""}, TokenizerNeed::optional);
  const std::shared_ptr<const model::Model> model = std::move(loaded.model);
  const model::ModelConfig& cfg = model->config();
  const std::unique_ptr<tok::Tokenizer> tokenizer = std::move(loaded.tokenizer);

  const bool has_ids = a.p.ids_option->count() > 0;
  std::vector<int32_t> prompt;
  if (!a.pack.empty()) {
    // --pack: validated briefing (schema, allowlist, size in characters and tokens), then
    // the --prompt text; its token cost is reported on stderr (docs/contracts.md).
    if (!tokenizer)
      fail_field(a.model, "tokenizer", "tokenizer metadata in the GGUF or --tokenizer JSON", "none");
    if (a.p.text_option->count() == 0) fail_field("--pack", "prompt", "--prompt TEXT", "another prompt source");
    const bool bos = !a.p.no_bos && tokenizer->add_bos_default();
    prompt = apply_pack(a.pack, a.allow, *tokenizer, checked_prompt_text(a.p.text, "--prompt"), bos);
  } else {
    prompt = prompt_input_ids(a.p, tokenizer.get(), a.model);
  }
  if (prompt.empty()) fail_field(has_ids ? "--prompt-ids" : "prompt", "tokens", "at least one", "none");
  for (int32_t id : prompt)
    if (id >= cfg.n_vocab)
      fail_field("prompt", "token id", "below the vocabulary size " + std::to_string(cfg.n_vocab),
                 std::to_string(id));
  if (a.n < 1) fail_field("-n", "steps", ">= 1", std::to_string(a.n));

  const int threads = resolve_threads(a.threads);
  model::Engine engine(model, model::EngineOptions{threads, a.allow_past_context});
  // Refused before anything runs; the cache holds the prompt and grows as tokens come.
  check_positions(engine, int64_t(prompt.size()), has_ids ? "--prompt-ids" : "prompt",
                  "tokens", a.n, "-n");
  std::optional<store::Store> from, to;
  const store::OnBadState on_bad_state = parse_on_bad_state(a.on_bad_state);
  if (!a.store.empty() || !a.save_to.empty()) {
    if (!tokenizer) fail_field(a.model, "tokenizer", "a tokenizer (its identity names the store's namespace)", "none");
    const store::BackendOptions bo = store_backend_options(a.password_file);
    if (!a.store.empty()) from.emplace(store::Store::open(a.store, bo));
    if (!a.save_to.empty()) to.emplace(store::Store::open(a.save_to, bo));
  }
  model::KvCache cache;
  int restored = 0;
  if (from) {
    store::PrefixRestore p = store::restore_longest_prefix(*from, engine, tokenizer->identity(), prompt, on_bad_state);
    cache = std::move(p.cache);
    restored = p.restored;
    std::fprintf(stderr, "ember: %s\n", printable(p.report).c_str());
  } else {
    cache = engine.new_cache(int(prompt.size()));
  }
  std::vector<float> boundary;  // step 0's logits, for --save-to's resume token
  model::SamplingParams sp;
  sp.temperature = a.temp;
  sp.top_k = a.top_k;
  sp.top_p = a.top_p;
  sp.seed = a.seed;
  model::Sampler sampler(sp);
  model::GenerateOptions opt;
  opt.max_steps = a.n;
  if (tokenizer && !a.ignore_eos) opt.is_eog = [&](int32_t id) { return tokenizer->is_eog(id); };

  std::vector<float> dump;
  std::unique_ptr<tok::StreamDecoder> stream;
  if (tokenizer) stream = std::make_unique<tok::StreamDecoder>(*tokenizer);
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  auto t_first = t0;
  const model::GenerateResult r = model::generate(
      engine, cache, std::span<const int32_t>(prompt).subspan(size_t(restored)), opt, sampler,
      [&](int step, std::span<const float> logits, int32_t token) {
        if (step == 0) t_first = clock::now();
        if (step == 0 && to) boundary.assign(logits.begin(), logits.end());
        if (!a.dump_logits.empty()) dump.insert(dump.end(), logits.begin(), logits.end());
        if (stream) {
          const std::string text = stream->push(token);
          std::fwrite(text.data(), 1, text.size(), stdout);
        } else {
          std::printf("%s%d", step ? " " : "", token);
        }
        std::fflush(stdout);
      });
  const auto t1 = clock::now();
  if (stream) {
    const std::string tail = stream->flush();
    std::fwrite(tail.data(), 1, tail.size(), stdout);
  }
  std::printf("\n");
  std::fflush(stdout);

  if (!a.dump_logits.empty()) {
    AtomicFile logits_file(a.dump_logits, a.force);
    logits_file.sink().write(dump.data(), dump.size() * sizeof(float));
    AtomicFile tokens_file(a.dump_logits + ".tokens", a.force);
    tokens_file.sink().write(prompt.data(), prompt.size() * sizeof(int32_t));
    tokens_file.sink().write(r.tokens.data(), r.tokens.size() * sizeof(int32_t));
    logits_file.commit();
    tokens_file.commit();
  }
  if (to) {
    const store::PutResult saved =
        store::save_prefill(*to, engine, tokenizer->identity(), prompt, cache, boundary, kProducer, {});
    std::fprintf(stderr, "ember: %s state %s (%zu positions) in %s\n", saved.stored ? "saved" : "already stored",
                 saved.seal.c_str(), prompt.size(), printable(to->uri()).c_str());
  }
  // Going past the context is said even with --quiet: it is not a statistic.
  const std::string past =
      past_context(engine, cache.n_pos)
          ? "; past the model's context length " + std::to_string(cfg.n_ctx) + " (--allow-past-context)"
          : "";
  if (a.quiet && !past.empty()) std::fprintf(stderr, "ember: %s\n", past.c_str() + 2);
  if (!a.quiet) {
    const double prefill_s = std::chrono::duration<double>(t_first - t0).count();
    const double decode_s = std::chrono::duration<double>(t1 - t_first).count();
    const size_t decoded = r.tokens.size() > 1 ? r.tokens.size() - 1 : 0;
    std::fprintf(stderr,
                 "ember: %zu prompt tokens (%.1f tok/s), %zu generated (%.1f tok/s)%s, %d threads%s, "
                 "%s%s\n",
                 prompt.size(), prefill_s > 0 ? double(prompt.size()) / prefill_s : 0.0,
                 r.tokens.size(), decode_s > 0 ? double(decoded) / decode_s : 0.0,
                 r.stopped_at_eog ? ", stopped at end of generation" : "", threads,
                 threads_origin(a.threads).c_str(), engine.fingerprint().c_str(),
                 past.c_str());
  }
}

}  // namespace

void register_run_command(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand("run", "Generate with ember's deterministic CPU engine");
  cmd->add_option("-m,--model", args->model, "GGUF model file")->required();
  cmd->add_option("--tokenizer", args->tokenizer,
                  "Hugging Face tokenizer.json (default: the GGUF's own tokenizer)");
  add_prompt_input_flags(cmd, args->p);
  auto* pack = cmd->add_option("--pack", args->pack,
                               "DOMCAP1 capability pack: validate it, prepend its briefing to --prompt");
  cmd->add_option("--allow", args->allow, "host tool allowlist that --pack is checked against");
  pack->excludes(cmd->get_option("--prompt-ids"));
  cmd->add_option("-n", args->n, "selection steps (tokens to generate)")->capture_default_str();
  add_threads_option(cmd, args->threads);
  add_past_context_flag(cmd, args->allow_past_context);
  cmd->add_option("--temp", args->temp, "sampling temperature (0: greedy)")
      ->capture_default_str()
      ->check(finite_number([](double t) { return t >= 0; }, "a finite number >= 0 (0: greedy)"));
  cmd->add_option("--top-k", args->top_k, "keep the k most likely tokens (0: all)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-p", args->top_p, "nucleus probability mass in (0, 1]")
      ->check(finite_number([](double p) { return p > 0 && p <= 1; }, "a number in (0, 1]"));
  cmd->add_option("--seed", args->seed, "sampling seed")->check(seed_value());
  cmd->add_option("--dump-logits", args->dump_logits,
                  "write every step's f32 logits [steps][vocab] to FILE and the prompt + chosen "
                  "ids (int32) to FILE.tokens");
  cmd->add_flag("--ignore-eos", args->ignore_eos, "do not stop at end-of-generation tokens");
  cmd->add_flag("--force", args->force, "overwrite existing --dump-logits files");
  cmd->add_flag("--quiet", args->quiet, "no statistics line on stderr");
  cmd->add_option("--store", args->store, "restore the longest stored prefix of the prompt from this store URI");
  cmd->add_option("--save-to", args->save_to, "store the prompt's state after prefill in this store URI");
  cmd->add_option("--on-bad-state", args->on_bad_state, "a stored state that fails a check: fail | recompute (and say so)")
      ->capture_default_str();
  add_password_file_flag(cmd, args->password_file);
  cmd->callback([args] {
    if (!has_prompt_input(args->p))
      fail_field("ember run", "prompt", "--prompt TEXT, --prompt-file F, --messages CONV.json or --prompt-ids LIST",
                 "none");
    args->p.chat.model = args->model;
    run(*args);
  });
}

}  // namespace ember::cli
