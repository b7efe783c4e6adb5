// ember study kv-quant: what each llama.cpp KV-cache quantization type costs on a prompt set
// (analysis/kv_quant_study.h), and with --budget the cheapest configuration within a budget,
// certified (analysis/kv_quant_budget.h); docs/kv-quantization.md. Thin: reads and tokenizes
// the prompts.
#include <iostream>
#include <memory>
#include <sstream>

#include "analysis/kv_quant_budget.h"
#include "analysis/kv_quant_study.h"
#include "cli/limits.h"
#include "cli/map_commands.h"
#include "cli/model_loader.h"
#include "cli/prompt_text.h"
#include "cli/trust_flags.h"
#include "cli/version.h"
#include "contract/receipt.h"
#include "gguf/quantize.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/printable.h"
#include "util/sha256.h"

namespace ember::cli {

namespace {

struct KvQuantArgs {
  std::string model, tokenizer, prompts, json_out, html, types, parts, rotation = "llamacpp", mode = "in-loop",
                                                                    groups = "heads", budget, certificate, sign;
  int limit = 64, continuation = 0, top_k = 10, threads = 0, chunks = 0;
  bool force = false, json = false;
};

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

// The prompts as the study reads them, and what the certificate says about them: the hash of
// exactly the text used (each line used plus "\n"; with --chunks the whole file).
struct Prompts {
  std::vector<std::vector<int32_t>> ids;
  std::string sha256;
  int lines = 0;
};

Prompts read_prompts(const KvQuantArgs& a, const LoadedModel& loaded, const model::Engine& engine) {
  const char* where = "study kv-quant";
  Prompts p;
  const std::string text = read_prompt_file(a.prompts);
  const tok::Tokenizer& tk = *loaded.tokenizer;
  if (a.chunks > 0) {
    // llama-perplexity's chunks: the whole text tokenized once (BOS as the model says), cut
    // into chunks of N tokens, each chunk's first token replaced by BOS.
    if (a.chunks < 4 || a.chunks > 8192) fail_field(where, "--chunks", "4..8192", std::to_string(a.chunks));
    check_positions(engine, a.chunks, a.prompts, "--chunks", 1, "--chunks");
    const std::vector<int32_t> all = tk.encode(text, tk.add_bos_default(), false);
    for (size_t b = 0; b + size_t(a.chunks) <= all.size() && int(p.ids.size()) < a.limit; b += size_t(a.chunks)) {
      std::vector<int32_t> c(all.begin() + ptrdiff_t(b), all.begin() + ptrdiff_t(b) + a.chunks);
      if (tk.add_bos_default() && tk.bos()) c[0] = *tk.bos();
      p.ids.push_back(std::move(c));
    }
    p.sha256 = sha256_hex(text.data(), text.size());
    p.lines = int(p.ids.size());
    return p;
  }
  std::string used;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line) && int(p.ids.size()) < a.limit;) {
    if (line.empty()) continue;
    std::vector<int32_t> ids = tk.encode(line, tk.add_bos_default());
    check_positions(engine, int64_t(ids.size()), a.prompts, "prompt tokens", 1, "--prompts");
    p.ids.push_back(std::move(ids));
    used += line + "\n";
  }
  p.sha256 = sha256_hex(used.data(), used.size());
  p.lines = int(p.ids.size());
  return p;
}

void run(const KvQuantArgs& a) {
  const char* where = "study kv-quant";
  if (a.limit < 1 || a.limit > 100000) fail_field(where, "--limit", "1..100000", std::to_string(a.limit));
  analysis::KvQuantStudyOptions o;
  o.continuation = a.continuation > 0 ? a.continuation : a.chunks > 0 ? a.chunks - 1 - a.chunks / 2 : 8;
  if (a.continuation < 0) fail_field(where, "--continuation", "1..256", std::to_string(a.continuation));
  o.top_k = a.top_k;
  o.rotation = analysis::parse_kv_rotation(a.rotation, where, "--rotation");
  o.mode = analysis::parse_kv_quant_mode(a.mode, where, "--mode");
  o.groups = analysis::parse_kv_quant_groups(a.groups, where, "--groups");
  for (const std::string& t : split_list(a.types)) {
    const auto type = gguf::parse_type_name(t);
    if (!type || !gguf::is_kv_cache_quant_type(*type))
      fail_field(where, "--types", "q8_0, q4_0, q4_1, q5_0, q5_1 or iq4_nl", "'" + t + "'");
    o.types.push_back(*type);
  }
  for (const std::string& p : split_list(a.parts)) o.parts.push_back(analysis::parse_perturb_part(p));
  std::optional<analysis::KvBudget> budget;
  if (!a.budget.empty()) budget = analysis::parse_kv_budget(a.budget, where, "--budget");
  if (!a.certificate.empty() && !budget)
    fail_field(where, "--certificate", "a --budget to certify", "no --budget");
  if (!a.sign.empty() && a.certificate.empty()) fail_field(where, "--sign", "a --certificate to sign", "none");
  if (budget && (a.json || !a.json_out.empty() || !a.html.empty()))
    fail_field(where, a.json ? "--json" : a.json_out.empty() ? "--html" : "--json-out",
               "no --budget (a budget run prints its table and writes --certificate)", "--budget");
  for (const std::string* p : {&a.json_out, &a.html, &a.certificate}) {
    refuse_output_is_input(*p, {a.model, a.tokenizer, a.prompts, a.sign});
    if (!p->empty() && !a.force && path_exists(*p))
      fail_field(where, "output", "a path that does not exist (or --force)", *p);
  }
  const LoadedModel loaded = load_model({a.model, a.tokenizer, ""});
  model::Engine engine(loaded.model, model::EngineOptions{resolve_threads(a.threads), false});
  const Prompts prompts = read_prompts(a, loaded, engine);
  if (budget) {
    const analysis::KvBudgetResult r = analysis::run_kv_quant_budget(engine, prompts.ids, o, *budget);
    std::cout << r.table();
    if (!a.certificate.empty()) {
      analysis::KvCertificateInputs in{a.model, a.prompts, prompts.sha256, producer_text(), prompts.lines};
      const nlohmann::ordered_json cert = analysis::kv_quant_certificate(r, in, a.sign);
      contract::write_contract_json(a.certificate, nlohmann::json::parse(cert.dump()), a.force);
      std::cout << "certificate " << a.certificate << ", seal " << cert["seal"].get<std::string>() << "\n";
    }
    return;
  }
  analysis::KvQuantStudy st = analysis::run_kv_quant_study(engine, prompts.ids, o);
  st.model_path = a.model;
  st.prompts_path = a.prompts;
  std::cout << (a.json ? printable_json(st.json_doc(), 2) + "\n" : st.table());
  if (!a.json_out.empty()) write_file_atomic(a.json_out, st.json(), a.force);
  if (!a.html.empty()) write_file_atomic(a.html, st.html(report_stamp({{"model", a.model}, {"prompts", a.prompts}})), a.force);
}

}  // namespace

void register_kv_quant_study_command(CLI::App& study) {
  auto a = std::make_shared<KvQuantArgs>();
  auto* c = study.add_subcommand(
      "kv-quant", "What llama.cpp's quantized KV caches (q8_0 ... iq4_nl; K, V, K+V) cost: KL, top-1/top-k "
                  "agreement, dNLL, per layer and KV head; --budget: the cheapest within a budget, certified");
  c->add_option("-m,--model", a->model, "Model (GGUF)")->required();
  c->add_option("--tokenizer", a->tokenizer, "tokenizer.json (default: the GGUF's own)");
  c->add_option("--prompts", a->prompts, "Prompts file, one per line")->required();
  c->add_option("--limit", a->limit, "Use the first N non-empty prompts (or N chunks; default 64)");
  c->add_option("--chunks", a->chunks,
                "Instead of lines: the whole file tokenized once and cut into chunks of N tokens, BOS first, as "
                "llama-perplexity -c N does (continuation default N - 1 - N/2: its scored half)");
  c->add_option("--mode", a->mode,
                "in-loop (default: each K/V row quantized as the engine writes it, as llama.cpp does) or prefix "
                "(a finished prefix quantized once: not what llama.cpp runs)");
  c->add_option("--groups", a->groups, "Per-layer and per-KV-head figures: heads (default), layers or none");
  c->add_option("--rotation", a->rotation,
                "llamacpp (default: llama.cpp v0.5.0's Hadamard rotation of quantized K/V where "
                "head_dim is a multiple of 64) or none (LLAMA_ATTN_ROT_DISABLE=1)");
  c->add_option("--continuation", a->continuation,
                "Reference tokens predicted per prompt: the prompt's last C + 1 tokens (default 8)");
  c->add_option("--top-k", a->top_k, "k of the top-k overlap (default 10)");
  c->add_option("--types", a->types, "Comma-separated types (default q8_0,q4_0,q4_1,q5_0,q5_1,iq4_nl)");
  c->add_option("--parts", a->parts, "Comma-separated parts among k, v, kv (default k,v,kv)");
  c->add_option("--budget", a->budget,
                "kl<=X[,top1>=Y]: the cheapest K/V type pair (or pair with first and last layers at f16) whose "
                "mean KL stays <= X (and top-1 agreement >= Y), chosen on the even prompts, confirmed on the odd");
  c->add_option("--certificate", a->certificate, "With --budget: write the sealed certificate here");
  add_sign_flag(c, a->sign);
  add_threads_option(c, a->threads);
  c->add_flag("--json", a->json, "Print the JSON report instead of the table");
  c->add_option("--json-out", a->json_out, "Write the JSON report to this file");
  c->add_option("--html", a->html, "Write the HTML report here");
  c->add_flag("--force", a->force, "Overwrite existing report files");
  c->callback([a] { run(*a); });
}

}  // namespace ember::cli
