// ember study kv-quant: what each llama.cpp KV-cache quantization type costs on a prompt set
// (analysis/kv_quant_study.h, docs/kv-quantization.md). Thin: reads and tokenizes the prompts.
#include <iostream>
#include <memory>
#include <sstream>

#include "analysis/kv_quant_study.h"
#include "cli/limits.h"
#include "cli/map_commands.h"
#include "cli/model_loader.h"
#include "cli/prompt_text.h"
#include "cli/version.h"
#include "gguf/quantize.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace ember::cli {

namespace {

struct KvQuantArgs {
  std::string model, tokenizer, prompts, json, html, types, parts, rotation = "llamacpp";
  int limit = 64, continuation = 8, top_k = 10, threads = 0;
  bool force = false;
};

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

void run(const KvQuantArgs& a) {
  const char* where = "study kv-quant";
  if (a.limit < 1 || a.limit > 100000) fail_field(where, "--limit", "1..100000", std::to_string(a.limit));
  analysis::KvQuantStudyOptions o;
  o.continuation = a.continuation;
  o.top_k = a.top_k;
  o.rotation = analysis::parse_kv_rotation(a.rotation, where, "--rotation");
  for (const std::string& t : split_list(a.types)) {
    const auto type = gguf::parse_type_name(t);
    if (!type || !gguf::is_kv_cache_quant_type(*type))
      fail_field(where, "--types", "q8_0, q4_0, q4_1, q5_0, q5_1 or iq4_nl", "'" + t + "'");
    o.types.push_back(*type);
  }
  for (const std::string& p : split_list(a.parts)) o.parts.push_back(analysis::parse_perturb_part(p));
  for (const std::string* p : {&a.json, &a.html}) {
    refuse_output_is_input(*p, {a.model, a.tokenizer, a.prompts});
    if (!p->empty() && !a.force && path_exists(*p))
      fail_field(where, "output", "a path that does not exist (or --force)", *p);
  }
  const LoadedModel loaded = load_model({a.model, a.tokenizer, ""});
  model::Engine engine(loaded.model, model::EngineOptions{resolve_threads(a.threads), false});
  std::vector<std::vector<int32_t>> prompts;
  std::stringstream text(read_prompt_file(a.prompts));
  for (std::string line; std::getline(text, line) && int(prompts.size()) < a.limit;) {
    if (line.empty()) continue;
    std::vector<int32_t> ids = loaded.tokenizer->encode(line, loaded.tokenizer->add_bos_default());
    check_positions(engine, int64_t(ids.size()), a.prompts, "prompt tokens", 1, "--prompts");
    prompts.push_back(std::move(ids));
  }
  analysis::KvQuantStudy st = analysis::run_kv_quant_study(engine, prompts, o);
  st.model_path = a.model;
  st.prompts_path = a.prompts;
  std::cout << st.table();
  if (!a.json.empty()) write_file_atomic(a.json, st.json(), a.force);
  if (!a.html.empty()) write_file_atomic(a.html, st.html(report_stamp({{"model", a.model}, {"prompts", a.prompts}})), a.force);
}

}  // namespace

void register_kv_quant_study_command(CLI::App& study) {
  auto a = std::make_shared<KvQuantArgs>();
  auto* c = study.add_subcommand(
      "kv-quant", "What llama.cpp's quantized KV caches (q8_0 ... iq4_nl; K, V, K+V) cost: KL, "
                  "top-1/top-k agreement, dNLL, per-layer/head K/V error");
  c->add_option("-m,--model", a->model, "Model (GGUF)")->required();
  c->add_option("--tokenizer", a->tokenizer, "tokenizer.json (default: the GGUF's own)");
  c->add_option("--prompts", a->prompts, "Prompts file, one per line")->required();
  c->add_option("--limit", a->limit, "Use the first N non-empty prompts (default 64)");
  c->add_option("--rotation", a->rotation,
                "llamacpp (default: llama.cpp v0.5.0's Hadamard rotation of quantized K/V where "
                "head_dim is a multiple of 64) or none (LLAMA_ATTN_ROT_DISABLE=1)");
  c->add_option("--continuation", a->continuation,
                "Reference tokens predicted per prompt: the prompt's last C + 1 tokens (default 8)");
  c->add_option("--top-k", a->top_k, "k of the top-k overlap (default 10)");
  c->add_option("--types", a->types, "Comma-separated types (default q8_0,q4_0,q4_1,q5_0,q5_1,iq4_nl)");
  c->add_option("--parts", a->parts, "Comma-separated parts among k, v, kv (default k,v,kv)");
  add_threads_option(c, a->threads);
  c->add_option("--json", a->json, "Write the JSON report here");
  c->add_option("--html", a->html, "Write the HTML report here");
  c->add_flag("--force", a->force, "Overwrite existing report files");
  c->callback([a] { run(*a); });
}

}  // namespace ember::cli
