// ember bench: engine speed with llama-bench's command line and output (docs/engine.md,
// "ember bench"). Thin over perf/: parse the lists, check every test, run each, print.
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cli/commands.h"
#include "cli/limits.h"
#include "cli/model_loader.h"
#include "perf/bench_flags.h"
#include "perf/bench_report.h"
#include "util/error.h"
#include "util/printable.h"

namespace ember::cli {

namespace {

// llama-bench's flags that are one dash and several letters. CLI11 reads "-ngl 99" as "-n"
// with the value "gl" and then a stray "99", so they are renamed to long flags before parsing.
const std::pair<const char*, const char*> kLlamaBenchFlags[] = {
    {"-pg", "--pg"},           {"-ngl", "--n-gpu-layers"},  {"-fa", "--flash-attn"},
    {"-mmp", "--mmap"},        {"-ub", "--ubatch-size"},     {"-ctk", "--cache-type-k"},
    {"-ctv", "--cache-type-v"}, {"-sm", "--split-mode"},     {"-mg", "--main-gpu"},
    {"-nkvo", "--no-kv-offload"}, {"-ts", "--tensor-split"}, {"-dev", "--device"},
    {"-nopo", "--no-op-offload"}};

// llama-bench flags that choose what ember has no choice of on the CPU: accepted, so a
// llama-bench command line runs as it is, and named in one note on stderr.
struct Ignored {
  const char* flags;  // CLI11 names
  const char* shown;  // as the note names it
  const char* help;
};
const Ignored kIgnored[] = {
    {"--n-gpu-layers", "-ngl", "GPU layers (ember runs every layer on the CPU)"},
    {"--split-mode", "-sm", "multi-GPU split (none here)"},
    {"--main-gpu", "-mg", "main GPU (none here)"},
    {"--tensor-split", "-ts", "multi-GPU split (none here)"},
    {"--no-kv-offload", "-nkvo", "KV offload (the cache is in host memory)"},
    {"--no-op-offload", "-nopo", "op offload (none here)"},
    {"--device", "-dev", "devices (the CPU only)"},
    {"--flash-attn", "-fa", "flash attention (ember has one attention path)"},
    {"--mmap", "-mmp", "mmap (ember always maps the model)"},
    {"-b,--batch-size", "-b", "batch size (ember evaluates a prompt in one batch)"},
    {"--ubatch-size", "-ub", "micro-batch size (ember evaluates a prompt in one batch)"},
};

struct BenchArgs {
  std::vector<std::string> models;
  std::vector<std::string> prompt, gen, threads, depth, pg;
  std::vector<std::string> cache_type_k, cache_type_v;
  std::vector<std::vector<std::string>> ignored = std::vector<std::vector<std::string>>(std::size(kIgnored));
  int reps = 5;
  std::string output = "md";
  bool progress = false, verbose = false;
  bool allow_past_context = false;
};

// The counts of every occurrence of a flag (llama-bench appends them), or `fallback`.
std::vector<int> counts(const std::vector<std::string>& values, const char* flag, std::vector<int> fallback) {
  if (values.empty()) return fallback;
  std::vector<int> out;
  for (const std::string& v : values)
    for (int c : perf::parse_bench_counts(v, flag)) out.push_back(c);
  return out;
}

// ember's KV cache is f16 and that is what it measures; a quantized cache type would measure
// something else under the same name.
void check_cache_types(const std::vector<std::string>& values, const char* flag) {
  for (const std::string& list : values) {
    size_t at = 0;
    while (true) {
      const size_t comma = list.find(',', at);
      const std::string t = list.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
      if (t != "f16")
        fail_field("bench", flag,
                   "f16 (ember times an f16 KV cache; `ember study kv-quant` measures what quantizing "
                   "it costs in accuracy)",
                   "'" + t + "'");
      if (comma == std::string::npos) break;
      at = comma + 1;
    }
  }
}

std::string test_name(const model::BenchTest& t) {
  std::string s = t.n_gen == 0 ? "pp" + std::to_string(t.n_prompt)
                  : t.n_prompt == 0 ? "tg" + std::to_string(t.n_gen)
                                    : "pp" + std::to_string(t.n_prompt) + "+tg" + std::to_string(t.n_gen);
  return t.n_depth > 0 ? s + " @ d" + std::to_string(t.n_depth) : s;
}

void run(const BenchArgs& a) {
  // Everything that can be refused is refused before the first test runs: stdout holds
  // nothing until a result, so an error cannot leave a header that breaks `-o csv` parsing.
  const perf::BenchFormat format = perf::parse_bench_format(a.output);
  const std::vector<int> prompt = counts(a.prompt, "-p", {512});
  const std::vector<int> gen = counts(a.gen, "-n", {128});
  const std::vector<int> depth = counts(a.depth, "-d", {0});
  std::vector<int> threads;
  for (int t : counts(a.threads, "-t", {0})) threads.push_back(resolve_threads(t, "-t"));
  std::vector<std::pair<int, int>> pg;
  for (const std::string& v : a.pg) pg.push_back(perf::parse_bench_pg(v));
  if (a.reps < 1) fail_field("bench", "-r", ">= 1", std::to_string(a.reps));
  check_cache_types(a.cache_type_k, "-ctk");
  check_cache_types(a.cache_type_v, "-ctv");
  std::string ignored;
  for (size_t i = 0; i < std::size(kIgnored); ++i)
    if (!a.ignored[i].empty()) ignored += std::string(ignored.empty() ? "" : ", ") + kIgnored[i].shown;
  if (!ignored.empty())
    std::fprintf(stderr, "ember: note: ignored %s: llama.cpp's GPU offload, batching, flash attention and mmap "
                         "choices do not apply on CPU, where ember has one way to run\n", ignored.c_str());

  struct Planned {
    std::string path;
    LoadedModel loaded;
    std::vector<model::BenchTest> tests;
  };
  std::vector<Planned> plan;
  size_t total = 0;
  for (const std::string& path : a.models) {
    Planned p{path, load_model({path, "", ""}, TokenizerNeed::optional), {}};
    // llama-bench's order: for each thread count and depth, the prompt tests, the generation
    // tests, then the -pg tests (a count of 0 is skipped).
    for (int t : threads)
      for (int d : depth) {
        for (int n : prompt)
          if (n > 0) p.tests.push_back({n, 0, d, t, a.reps});
        for (int n : gen)
          if (n > 0) p.tests.push_back({0, n, d, t, a.reps});
        for (const auto& [pp, tg] : pg) p.tests.push_back({pp, tg, d, t, a.reps});
      }
    model::check_bench_tests(p.loaded.model, p.tests, a.allow_past_context);
    total += p.tests.size();
    plan.push_back(std::move(p));
  }

  size_t done = 0;
  for (const Planned& p : plan) {
    const perf::BenchModelInfo info = perf::bench_model_info(*p.loaded.model, p.path);
    for (const model::BenchTest& test : p.tests) {
      if (a.progress)
        std::fprintf(stderr, "ember bench: test %zu/%zu: %s, threads %d, %s\n", done + 1, total,
                     test_name(test).c_str(), test.threads, printable(p.path).c_str());
      const perf::BenchRecord r = perf::run_bench(p.loaded.model, info, test, a.allow_past_context);
      const std::string header = done == 0 ? perf::bench_header(format) : "";
      std::fputs((header + perf::bench_record(format, r, done == 0)).c_str(), stdout);
      std::fflush(stdout);
      ++done;
    }
  }
  if (done == 0) std::fputs(perf::bench_header(format).c_str(), stdout);
  std::fputs(perf::bench_footer(format).c_str(), stdout);
}

}  // namespace

std::vector<std::string> llama_bench_long_flags(std::vector<std::string> args) {
  if (args.size() < 2 || args[1] != "bench") return args;
  for (size_t i = 2; i < args.size(); ++i) {
    if (args[i] == "--") break;
    const size_t eq = args[i].find('=');
    const std::string name = args[i].substr(0, eq);
    for (const auto& [from, to] : kLlamaBenchFlags)
      if (name == from) args[i] = to + (eq == std::string::npos ? "" : args[i].substr(eq));
  }
  return args;
}

void register_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* c = app.add_subcommand(
      "bench", "Engine speed with llama-bench's command line and columns (pp = prompt, tg = generation)");
  c->footer(
      "Lists take llama-bench's ranges: -p 64-256+64 is 64,128,192,256 (FIRST-LAST*FACTOR multiplies). "
      "llama-bench's one-dash flags work as written (-pg, -ngl, -fa, -mmp, -ub, -ctk, -ctv, -sm, -mg, -ts, "
      "-nkvo, -dev, -nopo).\n");
  c->add_option("-m,--model", args->models, "GGUF model (repeatable)")->required();
  c->add_option("-p,--n-prompt", args->prompt, "prompt tokens, a list (default 512)");
  c->add_option("-n,--n-gen", args->gen, "generated tokens, a list (default 128)");
  c->add_option("--pg", args->pg, "PP,TG: a prompt of PP tokens, then TG generated (llama-bench -pg; repeatable)");
  c->add_option("-t,--threads", args->threads,
                "threads, a list (default: the cores present); speed depends on it, the computed values do not");
  c->add_option("-d,--n-depth", args->depth, "tokens already in the KV cache, a list (default 0)");
  c->add_option("-r,--repetitions", args->reps, "repetitions of each test (default 5)");
  c->add_option("-o,--output", args->output, "md, csv, json, jsonl or sql (default md)");
  c->add_option("--cache-type-k", args->cache_type_k, "f16 only: the KV cache ember measures (llama-bench -ctk)");
  c->add_option("--cache-type-v", args->cache_type_v, "f16 only (llama-bench -ctv)");
  c->add_flag("--progress", args->progress, "a line on stderr as each test starts");
  c->add_flag("-v,--verbose", args->verbose, "accepted for llama-bench's command line; prints nothing more");
  for (size_t i = 0; i < std::size(kIgnored); ++i)
    c->add_option(kIgnored[i].flags, args->ignored[i], std::string("ignored: ") + kIgnored[i].help)
        ->expected(0, 1)
        ->group("llama-bench flags with no effect on CPU");
  add_past_context_flag(c, args->allow_past_context);
  c->callback([args] { run(*args); });
}

}  // namespace ember::cli
