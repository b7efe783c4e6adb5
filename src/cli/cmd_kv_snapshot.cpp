// ember kv export | verify | replay | validate-replay (docs/formats/kv-snapshot-v1.md,
// docs/cli-kv-snapshot.md). Thin over src/kv: parse flags, load, call, print.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "cli/kv_gate.h"
#include "cli/limits.h"
#include "cli/model_loader.h"
#include "cli/prompt_input.h"
#include "cli/prompt_text.h"
#include "cli/store_flags.h"
#include "cli/token_ids.h"
#include "cli/trust_flags.h"
#include "gguf/arch.h"
#include "kv/import.h"
#include "kv/replay.h"
#include "kv/spot_check.h"
#include "kv/state.h"
#include "kv/strict_json.h"
#include "model/engine.h"
#include "store/prefix.h"
#include "tokenizer/tokenizer.h"
#include "util/atomic_file.h"
#include "util/ed25519.h"
#include "util/error.h"
#include "util/printable.h"

namespace ember::cli {
namespace {

struct ModelArgs {
  std::string model, tokenizer, arch;
  int threads = 0;
  bool allow_past_context = false;
};

void add_model_flags(CLI::App* c, ModelArgs& a) {
  c->add_option("-m,--model", a.model, "GGUF model file")->required();
  c->add_option("--tokenizer", a.tokenizer, "Hugging Face tokenizer.json (default: the GGUF's own)");
  c->add_option("--arch", a.arch, "assert the model's architecture (" + gguf::arch_names("|") + ")");
  add_threads_option(c, a.threads);
  add_past_context_flag(c, a.allow_past_context);
}

struct LoadedEngine {
  std::shared_ptr<const model::Model> model;
  std::unique_ptr<tok::Tokenizer> tokenizer;
  std::unique_ptr<model::Engine> engine;
};

LoadedEngine load(const ModelArgs& a) {
  LoadedEngine l;
  LoadedModel m = load_model({a.model, a.tokenizer, a.arch});
  l.model = std::move(m.model);
  l.tokenizer = std::move(m.tokenizer);
  l.engine = std::make_unique<model::Engine>(
      l.model, model::EngineOptions{resolve_threads(a.threads), a.allow_past_context});
  return l;
}

// --prompt, --prompt-file (text or JSONL), --messages, --prompt-ids: cli/prompt_input.h, the same
// encoding as `ember run`, so the replay gate compares like with like.
std::vector<int32_t> prompt_tokens(const PromptInput& p, const LoadedEngine& l, const std::string& model) {
  const std::vector<int32_t> ids = prompt_input_ids(p, l.tokenizer.get(), model);
  if (ids.empty()) fail_field("prompt", "tokens", "at least one", "none");
  const int vocab = l.model->config().n_vocab;
  for (int32_t id : ids)
    if (id < 0 || id >= vocab)
      fail_field("prompt", "token id", "below the vocabulary size " + std::to_string(vocab), std::to_string(id));
  return ids;
}

void write_f32(const std::string& path, const std::vector<float>& v, bool force) {
  AtomicFile f(path, force);
  f.sink().write(v.data(), v.size() * sizeof(float));
  f.commit();
}

// A token's bytes for a one-line message: a byte-level token may be a partial UTF-8 sequence
// or a control character, so it goes through printable() like every string from a file.
std::string piece_text(const tok::Tokenizer& t, int32_t id) { return printable(t.token_bytes(id)); }

void add_export(CLI::App& kv) {
  struct Opts {
    ModelArgs m;
    PromptInput p;
    std::string output, boundary, sign;
    bool force = false, json = false;
    int witness = kv::kDefaultWitnessLength;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* c = kv.add_subcommand("export", "Prefill a prompt and write its KV state as ember.kv-snapshot.v1");
  add_model_flags(c, o->m);
  add_prompt_input_flags(c, o->p);
  c->add_option("--output,-o", o->output, "snapshot directory to create")->required();
  c->add_option("--boundary-logits", o->boundary,
                "also write the boundary logits (f32 [vocab], not part of the snapshot) to FILE");
  c->add_flag("--force", o->force, "replace an existing snapshot / logits file");
  c->add_flag("--json", o->json, "print what was written as JSON (seal, hashes, positions, resume token)");
  c->add_option("--witness", o->witness,
                "tokens of greedy continuation to record as the proof's witness, which kv verify --spot runs "
                "again (0: none)")
      ->check(CLI::Range(0, kv::kMaxWitnessLength))
      ->capture_default_str();
  add_sign_flag(c, o->sign);
  c->callback([o] {
    for (const std::string& out : {o->output, o->boundary})
      refuse_output_is_input(out, {o->m.model, o->m.tokenizer, o->p.file, o->p.messages, o->p.chat.tokenizer_config});
    const LoadedEngine l = load(o->m);
    o->p.chat.model = o->m.model;
    const std::vector<int32_t> prefix = prompt_tokens(o->p, l, o->m.model);
    check_positions(*l.engine, int64_t(prefix.size()), "prompt", "tokens", 1, "steps");
    kv::ExportResult r = kv::export_prefix(*l.engine, l.tokenizer->identity(), prefix, kProducer, o->witness);
    if (!o->sign.empty()) r.snapshot = kv::resign(std::move(r.snapshot), o->sign);
    kv::write_state_dir(r.snapshot, o->output, o->force);
    if (!o->boundary.empty()) write_f32(o->boundary, r.boundary_logits, o->force);
    const kv::SnapshotManifest& m = r.snapshot.manifest();
    if (o->json) {
      nlohmann::ordered_json j;
      j["output"] = o->output;
      j.update(kv::state_summary_json(m));
      j["past_context"] = m.past_context;
      std::fputs(kv::pretty_json(j).c_str(), stdout);
      return;
    }
    std::printf("%s: %d prefix tokens at positions [0, %d); resume token %d '%s' at position %lld\n",
                printable(o->output).c_str(), m.geometry.positions, m.geometry.positions, int(m.resume.token),
                piece_text(*l.tokenizer, m.resume.token).c_str(), static_cast<long long>(m.resume.position));
    std::printf("keys %s\nvalues %s\n", m.keys.sha256.c_str(), m.values.sha256.c_str());
    print_seal(m);
    if (m.past_context)
      std::fprintf(stderr, "ember: %d positions: past the model's context length %d "
                   "(--allow-past-context); the manifest records past_context\n",
                   m.geometry.positions, l.model->config().n_ctx);
  });
}

// kv verify --model M --spot K: the state re-decoded at K positions (kv/spot_check.h), after
// every integrity check passed. Adds its checks to the report; its JSON is the report's "spot".
nlohmann::ordered_json spot_verify(const std::string& dir, const ModelArgs& ma, int k, uint64_t seed,
                                   kv::VerifyReport& r) {
  nlohmann::ordered_json j = {{"k", k}, {"seed", seed}};
  auto add = [&](const std::string& name, const std::string& status, const std::string& detail) {
    r.checks.push_back({name, status, detail});
    if (status == "failed" && r.ok) {
      r.ok = false;
      r.error = detail;
    }
  };
  if (r.foreign)
    fail_field(dir, "--spot", "a native snapshot (a foreign cache's rows are another engine's: kv doctor)",
               "a foreign cache");
  const LoadedEngine l = load(ma);
  const kv::VerifiedState s = kv::open_state(dir);
  try {
    kv::check_compatible(s.manifest(), kv::describe_target(*l.engine, l.tokenizer->identity()),
                         dir + "/manifest.json");
  } catch (const Error& e) {
    add("spot.target", "failed", e.what());
    return j;
  }
  add("spot.target", "ok", "");
  const kv::SpotReport sr = kv::spot_check(*l.engine, s.manifest(), s.cache(), k, seed);
  nlohmann::ordered_json pos = nlohmann::ordered_json::array();
  for (const kv::SpotPosition& p : sr.positions) pos.push_back(p.position);
  j["positions"] = pos;
  const kv::SpotRowDiff* d = sr.first_diff();
  const std::string where = dir + ": spot";
  add("spot.rows", d ? "failed" : "ok",
      d ? where + ": rows: expected the stored rows, found a different " + d->describe() : "");
  if (d)
    j["first_diff"] = {{"position", d->position}, {"layer", d->layer}, {"kv_head", d->kv_head},
                       {"payload", d->values ? "values" : "keys"}, {"dim", d->dim},
                       {"stored", d->stored}, {"recomputed", d->recomputed}};
  add("spot.witness", sr.witness == "ok" ? "ok" : sr.witness == "differs" ? "failed" : "skipped",
      sr.witness == "differs" ? where + ": " + sr.witness_failure() : "");
  j["witness"] = {{"status", sr.witness}, {"tokens", sr.witness_length}};
  if (sr.witness == "differs" && sr.witness_first_layer >= 0) j["witness"]["first_layer"] = sr.witness_first_layer;
  add("spot.boundary_logits", sr.logits == "ok" ? "ok" : sr.logits == "differs" ? "failed" : "skipped",
      sr.logits == "differs" ? where + ": proof.boundary_logits_sha256: expected " + sr.logits_expected +
                                   " (manifest), found " + sr.logits_found + " (recomputed over the stored prefix)"
                             : "");
  j["boundary_logits"] = {{"status", sr.logits}, {"sha256", sr.logits_found}};
  add("spot.resume", sr.resume_ok ? "ok" : "failed",
      sr.resume_ok ? "" : where + ": resume.token: expected " + std::to_string(sr.resume_found) +
                              " (argmax of the recomputed boundary logits), found " +
                              std::to_string(s.manifest().resume.token));
  j["result"] = sr.ok() ? "ok" : "failed";
  j["summary"] = sr.summary();
  return j;
}

void add_verify(CLI::App& kv) {
  struct Opts {
    std::string dir;
    bool json = false, allow_foreign = false;
    kv::TrustRequirements trust;
    ModelArgs m;
    int spot = 4;
    uint64_t seed = 0;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* c = kv.add_subcommand(
      "verify", "Check a snapshot's format, sizes, hashes and consistency; with --model, re-decode --spot positions");
  c->add_option("dir", o->dir, "snapshot directory")->required();
  c->add_flag("--json", o->json, "print the report as canonical JSON");
  c->add_flag("--allow-foreign", o->allow_foreign,
              "also verify a foreign cache (kv import-llamacpp): its integrity, not its numerics");
  add_trust_flags(c, o->trust);
  c->add_option("--model,-m", o->m.model, "GGUF model: also re-decode --spot positions from the stored prefix");
  c->add_option("--tokenizer", o->m.tokenizer, "Hugging Face tokenizer.json (default: the GGUF's own)");
  add_threads_option(c, o->m.threads);
  add_past_context_flag(c, o->m.allow_past_context);
  auto* spot = c->add_option("--spot", o->spot, "positions re-decoded with --model (the last always among them)")
                   ->capture_default_str();
  c->add_option("--seed", o->seed, "seed of the sampled positions")->capture_default_str();
  c->callback([o, spot] {
    if (o->m.model.empty() && spot->count() > 0)
      fail_field("kv verify", "--spot", "--model M.gguf (the spot check re-decodes with it)", "no --model");
    if (o->spot < 1) fail_field("kv verify", "--spot", "an integer >= 1", std::to_string(o->spot));
    if (kv::state_kind(o->dir) == "kvc1")
      fail_field("kv verify", o->dir, "a snapshot directory (a KVC1 file is checked by ember kvc verify " + o->dir + ")",
                 "a KVC1 file");
    kv::VerifyReport r = kv::verify_snapshot(o->dir, kv::Accept::native, o->allow_foreign);
    if (r.ok && (!o->trust.expect_seal.empty() || !o->trust.trusted_key_pem.empty())) {
      kv::VerifyCheck ch{"trust", "ok", ""};
      try {
        check_artifact_trust(o->dir, r.manifest, o->trust);
      } catch (const Error& e) {
        ch.status = "failed";
        ch.detail = e.what();
        r.ok = false;
        r.error = e.what();
      }
      r.checks.push_back(ch);
    }
    std::optional<nlohmann::ordered_json> spot_json;
    if (r.ok && !o->m.model.empty()) spot_json = spot_verify(o->dir, o->m, o->spot, o->seed, r);
    if (o->json) {
      nlohmann::ordered_json j = r.to_json();
      if (spot_json) {
        j["result"] = r.ok ? "ok" : "failed";
        j["spot"] = *spot_json;
        if (!r.ok) {
          j.erase("error");
          j["error"] = r.error;
        }
      }
      std::fputs(kv::pretty_json(j).c_str(), stdout);
    } else {
      for (const auto& ch : r.checks)
        std::printf("%-22s %s%s%s\n", ch.name.c_str(), ch.status.c_str(), ch.detail.empty() ? "" : ": ",
                    printable(ch.detail).c_str());
      if (spot_json && spot_json->contains("summary"))
        std::printf("spot: %s\n", printable((*spot_json)["summary"].get<std::string>()).c_str());
      if (r.ok)
        std::printf("%s: ok (%d positions, resume token %d at position %lld)\n", printable(o->dir).c_str(),
                    r.manifest.geometry.positions, int(r.manifest.resume.token),
                    static_cast<long long>(r.manifest.resume.position));
      if (r.ok && r.foreign)
        std::printf("a foreign cache: K/V computed by %s (%s v%d, K %s, V %s, %s): verified are its "
                    "bytes and seal, not ember's numerics\n",
                    printable(r.foreign->engine).c_str(), printable(r.foreign->format).c_str(),
                    r.foreign->format_version, printable(r.foreign->cache_type_k).c_str(),
                    printable(r.foreign->cache_type_v).c_str(), printable(r.foreign->conversion).c_str());
      // The seal was recomputed and checked on read (over the foreign provenance too).
      if (r.manifest_ok && r.foreign) {
        std::printf("seal %s\n", r.manifest.seal.c_str());
        if (r.manifest.signature) std::printf("signed by %s\n", r.manifest.signature->public_key.c_str());
      } else if (r.manifest_ok)
        print_seal(r.manifest);
    }
    if (!r.ok) throw CheckFailed{"verify failed: " + r.error};
  });
}

// kv replay --store / --save-to: the prompt through store::run_with_store (store/prefix.h).
template <typename Opts>
void replay_with_store(Opts& o) {
  if (!o.snapshot.empty())
    fail_field("kv replay", "--snapshot", "no snapshot with --store/--save-to (the prompt is the input)", o.snapshot);
  const store::OnBadState on_bad_state = parse_on_bad_state(o.on_bad_state);
  refuse_output_is_input(o.logits_out, {o.m.model, o.m.tokenizer, o.p.file, o.p.messages, o.p.chat.tokenizer_config});
  if (!has_prompt_input(o.p))
    fail_field("kv replay", "prompt", "--prompt TEXT, --prompt-file F, --messages CONV.json or --prompt-ids LIST", "none");
  const LoadedEngine l = load(o.m);
  o.p.chat.model = o.m.model;
  const std::vector<int32_t> prompt = prompt_tokens(o.p, l, o.m.model);
  check_positions(*l.engine, int64_t(prompt.size()), "prompt", "tokens", o.n, "-n");
  const store::BackendOptions bo = store_backend_options(o.password_file);
  std::optional<store::Store> from, to;
  if (!o.store.empty()) from.emplace(store::Store::open(o.store, bo));
  if (!o.save_to.empty()) to.emplace(store::Store::open(o.save_to, bo));
  store::StoreRunOptions opt;
  opt.steps = o.n;
  opt.keep_logits = !o.logits_out.empty();
  opt.from = from ? &*from : nullptr;
  opt.save_to = to ? &*to : nullptr;
  opt.on_bad_state = on_bad_state;
  opt.producer = kProducer;
  opt.save.name = o.save_name;
  if (!o.ignore_eos) opt.is_eog = [&](int32_t id) { return l.tokenizer->is_eog(id); };
  const store::StoreRun r = store::run_with_store(*l.engine, l.tokenizer->identity(), prompt, opt);
  if (!r.report.empty()) std::fprintf(stderr, "ember: %s\n", printable(r.report).c_str());
  tok::StreamDecoder dec(*l.tokenizer);
  std::string text;
  for (int32_t t : r.tokens) text += dec.push(t);
  text += dec.flush();
  std::printf("%s\n", text.c_str());
  if (opt.keep_logits) write_f32(o.logits_out, r.logits, o.force);
  if (to)
    std::fprintf(stderr, "ember: %s state %s (%d positions) in %s\n", r.saved.stored ? "saved" : "already stored",
                 r.saved.seal.c_str(), int(prompt.size()), printable(to->uri()).c_str());
  std::fprintf(stderr, "ember: %zu prompt tokens, %d restored from the store; %zu steps%s\n", prompt.size(),
               r.restored, r.tokens.size(), r.stopped_at_eog ? ", stopped at end of generation" : "");
}

void add_replay(CLI::App& kv) {
  struct Opts {
    ModelArgs m;
    std::string snapshot, logits_out;
    int n = 16;
    bool ignore_eos = false, force = false, allow_foreign = false;
    kv::TrustRequirements trust;
    // The store path (docs/store.md): the prompt is the input, its longest stored prefix is
    // restored, the rest computed.
    PromptInput p;
    std::string store, save_to, save_name, on_bad_state = "fail", password_file;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* c = kv.add_subcommand("replay", "Import a snapshot strictly and continue greedily from its resume token");
  add_model_flags(c, o->m);
  c->add_option("snapshot,--snapshot", o->snapshot, "snapshot directory or KVC1 file (positional, as kv verify)");
  c->add_option("--store", o->store, "restore the longest stored prefix of the prompt from this store URI");
  c->add_option("--save-to", o->save_to, "store the prompt's state after prefill in this store URI");
  c->add_option("--save-name", o->save_name, "a name for the state --save-to stores");
  c->add_option("--on-bad-state", o->on_bad_state, "a stored state that fails a check: fail | recompute (and say so)")
      ->capture_default_str();
  add_prompt_input_flags(c, o->p);
  add_password_file_flag(c, o->password_file);
  c->add_option("-n", o->n, "selection steps after the resume token")->capture_default_str();
  c->add_option("--logits-out", o->logits_out, "write every step's f32 logits [steps][vocab] to FILE");
  c->add_flag("--ignore-eos", o->ignore_eos, "do not stop at end-of-generation tokens");
  c->add_flag("--force", o->force, "replace an existing --logits-out file");
  c->add_flag("--allow-foreign", o->allow_foreign,
              "also continue a foreign cache (ember.kv-foreign, e.g. imported from llama.cpp): its K/V are "
              "another engine's numerics, so the result is not ember's own");
  add_trust_flags(c, o->trust);
  c->callback([o] {
    if (!o->store.empty() || !o->save_to.empty()) return replay_with_store(*o);
    if (o->snapshot.empty())
      fail_field("kv replay", "input", "--snapshot DIR, or --store/--save-to URI with a prompt", "none");
    refuse_output_is_input(o->logits_out, {o->snapshot, o->m.model, o->m.tokenizer});
    const kv::Accept accept = o->allow_foreign ? kv::Accept::any : kv::Accept::native;
    const std::string cached = "geometry.positions + the resume token";
    // A snapshot directory's manifest is read (strictly) first, so that a state of a kind this
    // command does not take, or positions beyond the model's context, are refused before a
    // payload is read; then the state is read once (kv::open_state: every check of its
    // reader, the payload hashed once) and never hashed again.
    const bool dir = kv::state_kind(o->snapshot) == "snapshot-dir";
    const int64_t head_positions = dir ? kv::read_state_header(o->snapshot, accept).header.manifest.geometry.positions : 0;
    const LoadedEngine l = load(o->m);
    if (dir) check_positions(*l.engine, head_positions + 1, o->snapshot, cached, o->n, "-n");
    const kv::VerifiedState s = open_state_ref(o->snapshot, {accept, false});
    if (s.kind() == kv::StateKind::mapped)
      fail_field(o->snapshot, "format", std::string(kv::kSnapshotFormat) + " (a native snapshot)",
                 std::string("'") + kv::kMappedFormat + "' (a mapped cache: ember map replay reads it)");
    const bool foreign = s.kind() == kv::StateKind::foreign;
    if (foreign) {
      const kv::ForeignProvenance& f = *s.header().foreign();
      std::fprintf(stderr, "ember: %s is a foreign cache (engine %s, K %s, V %s): its numerics are not ember's "
                   "(--allow-foreign); the continuation is ember's engine over another engine's K/V\n",
                   printable(o->snapshot).c_str(), printable(f.engine).c_str(), printable(f.cache_type_k).c_str(),
                   printable(f.cache_type_v).c_str());
    }
    check_artifact_trust(o->snapshot, s.manifest(), o->trust);
    if (!dir) check_positions(*l.engine, int64_t(s.manifest().geometry.positions) + 1, o->snapshot, cached, o->n, "-n");
    kv::ContinueOptions opt;
    opt.steps = o->n;
    opt.keep_logits = !o->logits_out.empty();
    opt.where = o->snapshot;
    opt.allow_foreign = foreign;
    if (!o->ignore_eos) opt.is_eog = [&](int32_t id) { return l.tokenizer->is_eog(id); };
    const kv::Continuation r = kv::replay(s, *l.engine, l.tokenizer->identity(), opt);
    tok::StreamDecoder dec(*l.tokenizer);
    std::string text = dec.push(s.manifest().resume.token);
    for (int32_t t : r.tokens) text += dec.push(t);
    text += dec.flush();
    std::printf("%s\n", text.c_str());
    if (opt.keep_logits) write_f32(o->logits_out, r.logits, o->force);
    std::fprintf(stderr, "ember: resumed at position %lld from %d cached positions; %zu steps%s\n",
                 static_cast<long long>(s.manifest().resume.position), s.manifest().geometry.positions,
                 r.tokens.size(), r.stopped_at_eog ? ", stopped at end of generation" : "");
  });
}

void add_validate_replay(CLI::App& kv) {
  auto o = std::make_shared<GateArgs>();
  CLI::App* c = kv.add_subcommand(
      "validate-replay",
      "The exact-replay gate: native == concat(boundary, replay), f32 bit for bit, in 3 processes");
  c->add_option("-m,--model", o->model, "GGUF model file")->required();
  c->add_option("--tokenizer", o->tokenizer, "Hugging Face tokenizer.json (default: the GGUF's own)");
  c->add_option("--arch", o->arch, "assert the model's architecture");
  auto* t = c->add_option("-p,--prompt", o->prompt, "prompt text");
  auto* f = c->add_option("-f,--prompt-file", o->prompt_file, "prompt text file");
  auto* m = c->add_option("--messages", o->messages,
                          "conversation JSON rendered by the chat template (no BOS added), as run and kv export take it");
  t->excludes(f)->excludes(m);
  f->excludes(m);
  add_chat_render_options(c, o->chat, /*with_config=*/true);
  c->add_option("-n", o->n, "selection steps of the uninterrupted run (>= 2)")->required();
  c->add_option("-o,--output", o->out, "directory for the logits, snapshot, logs and receipt.json")->required();
  add_threads_option(c, o->threads, "threads of every process (default: the cores present)");
  c->add_option("--native-threads", o->native_threads, "threads of the uninterrupted run");
  c->add_option("--export-threads", o->export_threads, "threads of the export");
  c->add_option("--replay-threads", o->replay_threads, "threads of the replay");
  c->add_option("--native-simd", o->native_simd, "EMBER_SIMD of the uninterrupted run");
  c->add_option("--export-simd", o->export_simd, "EMBER_SIMD of the export");
  c->add_option("--replay-simd", o->replay_simd, "EMBER_SIMD of the replay");
  c->add_flag("--force", o->force, "reuse an --output directory that already holds a gate run");
  c->callback([o] {
    if (o->prompt.empty() && o->prompt_file.empty() && o->messages.empty())
      fail_field("validate-replay", "prompt", "--prompt TEXT, --prompt-file F or --messages CONV.json", "none");
    o->threads = check_threads(o->threads, "--threads");
    o->native_threads = check_threads(o->native_threads, "--native-threads");
    o->export_threads = check_threads(o->export_threads, "--export-threads");
    o->replay_threads = check_threads(o->replay_threads, "--replay-threads");
    const kv::GateOutcome g = run_replay_gate(*o);
    std::printf("%s\n", g.summary.c_str());
    std::printf("receipt: %s\n", printable(g.receipt_path).c_str());
    if (!g.pass) throw CheckFailed{"replay gate failed: " + g.summary};
  });
}

void add_keygen(CLI::App& kv) {
  struct Opts {
    std::string private_key, public_key;
    bool force = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* c = kv.add_subcommand("keygen", "Write a new Ed25519 key pair for --sign / --trust (PEM)");
  c->add_option("--private", o->private_key, "private key file to create (mode 0600)")->required();
  c->add_option("--public", o->public_key, "public key file to create")->required();
  c->add_flag("--force", o->force, "replace existing key files");
  c->callback([o] {
    ed25519_generate(o->private_key, o->public_key, o->force);
    std::printf("public key %s\n", ed25519_public_key(o->public_key).c_str());
  });
}

}  // namespace

void register_kv_snapshot_commands(CLI::App& kv) {
  add_export(kv);
  add_keygen(kv);
  add_verify(kv);
  add_replay(kv);
  add_validate_replay(kv);
}

}  // namespace ember::cli
