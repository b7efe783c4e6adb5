// ember contract validate | ember pack validate | ember pack eval: thin over src/contract/ and
// src/eval/.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/limits.h"
#include "cli/model_loader.h"
#include "cli/pack_tokens.h"
#include "contract/pack.h"
#include "contract/receipt.h"
#include "contract/registry.h"
#include "eval/pack_eval.h"
#include "util/atomic_file.h"
#include "util/json_strict.h"
#include "util/error.h"
#include "util/printable.h"

namespace ember::cli {

namespace {

struct ContractArgs {
  std::string file;
  bool json = false;
};

struct PackArgs {
  std::string pack, allow, model, tokenizer;
  size_t max_chars = contract::PackLimits{}.max_chars;
  size_t max_tokens = contract::PackLimits{}.max_tokens;
  bool json = false;
};

void run_contract_validate(const ContractArgs& a) {
  const contract::DocumentCheck c = contract::validate_file(a.file);
  if (a.json) {
    nlohmann::json j = {{"file", a.file}, {"schema", c.schema}, {"valid", c.errors.empty()},
                        {"errors", c.errors}};
    std::printf("%s\n", printable_json(j, 2).c_str());
  } else {
    for (const auto& e : c.errors) std::printf("%s: %s\n", printable(a.file).c_str(), printable(e).c_str());
    if (c.errors.empty()) std::printf("%s: valid %s\n", printable(a.file).c_str(), c.schema.c_str());
  }
  if (!c.errors.empty())
    throw CheckFailed{a.file + ": invalid " + c.schema + " (" + std::to_string(c.errors.size()) + " violations)"};
}

void run_pack_validate(const PackArgs& a) {
  const contract::ToolAllowlist allow = contract::ToolAllowlist::load(a.allow);
  contract::PackLimits limits{a.max_chars, a.max_tokens};
  std::unique_ptr<contract::TokenCounter> counter = make_token_counter(a.model, a.tokenizer);
  const contract::PackReport r = contract::check_pack(a.pack, allow, limits, counter.get());
  if (a.json) {
    nlohmann::json j = {{"pack", a.pack}, {"valid", r.ok()}, {"errors", r.errors},
                        {"tools", r.tools}, {"briefing_chars", r.briefing_chars}};
    j["briefing_tokens"] = r.briefing_tokens ? nlohmann::json(*r.briefing_tokens) : nlohmann::json(nullptr);
    std::printf("%s\n", printable_json(j, 2).c_str());
  } else {
    for (const auto& e : r.errors) std::printf("%s: %s\n", printable(a.pack).c_str(), printable(e).c_str());
    if (r.ok()) {
      std::printf("%s: valid DOMCAP1 pack; tools:", a.pack.c_str());
      for (const auto& t : r.tools) std::printf(" %s", printable(t).c_str());
      std::printf("; briefing %zu characters", r.briefing_chars);
      if (r.briefing_tokens) std::printf(", %zu tokens", *r.briefing_tokens);
      std::printf("\n");
    }
  }
  if (!r.ok()) throw CheckFailed{a.pack + ": capability pack refused: " + r.errors.front()};
}

struct PackEvalArgs {
  std::string pack, allow, model, tokenizer, output;
  int n = 32;
  int threads = 0;
  bool force = false;
};

// Runs the pack's checked probes with and without the briefing and writes the receipt
// (atomically; an existing file only with --force), or prints it when no --output is given.
void run_pack_eval(const PackEvalArgs& a) {
  refuse_output_is_input(a.output, {a.pack, a.allow, a.model, a.tokenizer});
  if (!a.output.empty() && !a.force && path_exists(a.output))
    fail_field(a.output, "--output", "a path that does not exist yet (or --force)", "an existing file");
  // No --allow: an empty allowlist, so a pack that names any tool is refused.
  contract::ToolAllowlist allow;
  allow.path = "(no --allow: the empty allowlist)";
  if (!a.allow.empty()) allow = contract::ToolAllowlist::load(a.allow);
  LoadedModel loaded = load_model({a.model, a.tokenizer, ""}, TokenizerNeed::required);
  const int threads = resolve_threads(a.threads);
  model::Engine engine(loaded.model, model::EngineOptions{threads, false});
  eval::PackEvalOptions opt;
  opt.max_tokens = a.n;
  opt.add_bos = loaded.tokenizer->add_bos_default();
  opt.model_name = a.model.substr(a.model.find_last_of('/') + 1);
  const eval::PackEvalResult r = eval::evaluate_pack(a.pack, allow, engine, *loaded.tokenizer, opt);
  if (a.output.empty()) {
    // On a terminal, model output and pack text must not act on it: every character outside
    // printable ASCII is escaped (\uXXXX). The same JSON value as the file would hold.
    const std::string text = r.receipt.dump(2, ' ', /*ensure_ascii=*/true) + "\n";
    std::fwrite(text.data(), 1, text.size(), stdout);
  } else {
    write_file_atomic(a.output, pretty_json(r.receipt), a.force);
  }
  for (const auto& id : r.skipped)
    std::fprintf(stderr, "ember: probe %s: no expect.check, not evaluated\n", printable(id).c_str());
  const auto& t = r.receipt["totals"];
  std::fprintf(stderr,
               "ember: pack %s: %d/%d probes pass without the briefing, %d/%d with (difference %+.3f); "
               "briefing %d bytes, %d tokens; tokens used %d without, %d with%s%s\n",
               printable(r.receipt["pack"]["id"].get<std::string>()).c_str(), t["passed_without"].get<int>(),
               t["n_probes"].get<int>(), t["passed_with"].get<int>(), t["n_probes"].get<int>(),
               t["difference"].get<double>(), t["briefing_bytes"].get<int>(), t["briefing_tokens"].get<int>(),
               t["tokens_without"].get<int>(), t["tokens_with"].get<int>(), a.output.empty() ? "" : "; receipt ",
               a.output.empty() ? "" : printable(a.output).c_str());
}

struct RegistryArgs {
  std::string registry, entry, receipt, id, description;
  bool replace = false;
};

// Adds one entry (schema-valid, its evidence hashing to the files it names) and rewrites the
// registry canonically and atomically; a new registry file is created.
void run_registry_add(const RegistryArgs& a) {
  if (a.entry.empty() == a.receipt.empty())
    fail_field("contract registry add", "entry", "ENTRY.json or --receipt R.json (one of them)",
               a.entry.empty() ? "neither" : "both");
  if (!a.receipt.empty() && a.id.empty())
    fail_field("contract registry add", "--id", "the entry's id with --receipt", "none");
  const std::string source = a.receipt.empty() ? a.entry : a.receipt;
  const nlohmann::json entry =
      a.receipt.empty()
          ? contract::rebase_receipt_paths(parse_json_strict(read_input(a.entry, 16u << 20), a.entry), a.entry, a.registry)
          : contract::entry_from_receipt(a.receipt, a.registry, a.id, a.description);
  const bool exists = path_exists(a.registry);
  contract::Registry r = exists ? contract::Registry::read(a.registry) : contract::Registry::empty();
  r.add(entry, a.replace, source);
  const auto problems = contract::registry_evidence_problems(entry, a.registry);
  if (!problems.empty()) fail(source, "not added to " + a.registry + ": " + problems.front());
  r.write(a.registry, /*overwrite=*/exists);
  std::printf("%s: %s entry %s, %s (%zu entries)\n", printable(a.registry).c_str(), exists ? "updated with" : "created with",
              printable(entry["id"].get<std::string>()).c_str(), entry["status"].get<std::string>().c_str(),
              r.entries.size());
}

void run_registry_ls(const RegistryArgs& a) {
  const contract::Registry r = contract::Registry::read(a.registry);
  std::printf("%-40s %-9s %-8s %-16s %-16s %s\n", "id", "status", "kind", "source", "target", "mapper");
  for (const auto& e : r.entries) {
    const std::string mapper = e["mapper_hash"].is_null() ? "-" : e["mapper_hash"].get<std::string>().substr(0, 16);
    std::printf("%-40s %-9s %-8s %-16.16s %-16.16s %s\n", printable(e["id"].get<std::string>()).c_str(),
                e["status"].get<std::string>().c_str(), e["kind"].get<std::string>().c_str(),
                e["source"]["model_identity"].get<std::string>().c_str(),
                e["target"]["model_identity"].get<std::string>().c_str(), mapper.c_str());
  }
}

void run_registry_check(const RegistryArgs& a) {
  const auto problems = contract::check_registry(a.registry);
  for (const auto& p : problems) std::printf("%s: %s\n", printable(a.registry).c_str(), printable(p).c_str());
  if (!problems.empty())
    throw CheckFailed{a.registry + ": " + std::to_string(problems.size()) + " entries with unsound evidence"};
  std::printf("%s: valid registry; every named receipt hashes to its file\n", printable(a.registry).c_str());
}

}  // namespace

void register_contract_commands(CLI::App& app) {
  CLI::App* contract = app.add_subcommand("contract", "Translator contract documents: validate against the schemas");
  contract->require_subcommand(1);
  auto ca = std::make_shared<ContractArgs>();
  CLI::App* validate = contract->add_subcommand(
      "validate", "Validate a bridge receipt, registry entry, parity receipt, DOMCAP1 pack or tool allowlist");
  validate->add_option("file", ca->file, "JSON document (its \"format\" field selects the schema)")->required();
  validate->add_flag("--json", ca->json, "Machine-readable report");
  validate->callback([ca] { run_contract_validate(*ca); });

  CLI::App* reg = contract->add_subcommand("registry", "The translator registry that map apply --registry consults");
  reg->require_subcommand(1);
  auto ra = std::make_shared<RegistryArgs>();
  CLI::App* add = reg->add_subcommand("add", "Add an entry (ember.translator-registry.v1) to REG.json (created if absent)");
  add->add_option("registry", ra->registry, "Registry file (ember.translator-registry-file.v1)")->required();
  add->add_option("entry", ra->entry, "Registry entry JSON (relative receipt paths: from its own directory)");
  add->add_option("--receipt", ra->receipt, "Instead of ENTRY: the entry of the translator this bridge receipt describes");
  add->add_option("--id", ra->id, "With --receipt: the entry's id");
  add->add_option("--description", ra->description, "With --receipt: the entry's description");
  add->add_flag("--replace", ra->replace, "Replace the entry of the same id (e.g. to revoke it)");
  add->callback([ra] { run_registry_add(*ra); });
  CLI::App* ls = reg->add_subcommand("ls", "List the entries");
  ls->add_option("registry", ra->registry, "Registry file")->required();
  ls->callback([ra] { run_registry_ls(*ra); });
  CLI::App* check = reg->add_subcommand("check", "Read strictly and hash every receipt file the entries name");
  check->add_option("registry", ra->registry, "Registry file")->required();
  check->callback([ra] { run_registry_check(*ra); });

  CLI::App* pack = app.add_subcommand("pack", "DOMCAP1 capability packs");
  pack->require_subcommand(1);
  auto pa = std::make_shared<PackArgs>();
  CLI::App* pv = pack->add_subcommand("validate", "Check a pack: schema, tools against the host allowlist, briefing size");
  pv->add_option("pack", pa->pack, "DOMCAP1 pack (JSON)")->required();
  pv->add_option("--allow", pa->allow, "Host tool allowlist (ember.tool-allowlist.v1)")->required();
  pv->add_option("-m,--model", pa->model, "Count briefing tokens with this GGUF model's tokenizer");
  pv->add_option("--tokenizer", pa->tokenizer, "Count briefing tokens with this tokenizer.json");
  pv->add_option("--max-chars", pa->max_chars, "Host limit on briefing characters")->capture_default_str();
  pv->add_option("--max-tokens", pa->max_tokens, "Host limit on briefing tokens")->capture_default_str();
  pv->add_flag("--json", pa->json, "Machine-readable report");
  pv->callback([pa] { run_pack_validate(*pa); });

  auto ea = std::make_shared<PackEvalArgs>();
  CLI::App* pe = pack->add_subcommand(
      "eval", "Run the pack's probes with and without its briefing (greedy) and write the evaluation receipt");
  pe->add_option("pack", ea->pack, "DOMCAP1 pack (JSON); probes with expect.check are run")->required();
  pe->add_option("-m,--model", ea->model, "GGUF model file")->required();
  pe->add_option("--tokenizer", ea->tokenizer, "Hugging Face tokenizer.json (default: the GGUF's own tokenizer)");
  pe->add_option("--allow", ea->allow, "Host tool allowlist (default: none, so a pack naming a tool is refused)");
  pe->add_option("-o,--output", ea->output, "Receipt file (ember.pack-eval-receipt.v1); default: stdout");
  pe->add_option("-n", ea->n, "Selection steps per run")->capture_default_str();
  add_threads_option(pe, ea->threads);
  pe->add_flag("--force", ea->force, "Replace an existing --output");
  pe->callback([ea] { run_pack_eval(*ea); });
}

}  // namespace ember::cli
