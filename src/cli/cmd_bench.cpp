// ember bench: engine speed with llama-bench's interface and output (docs/engine.md,
// "ember bench"). Thin over perf/bench_report.h: parse the lists, run each test, print.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/limits.h"
#include "cli/model_loader.h"
#include "perf/bench_report.h"
#include "util/error.h"

namespace ember::cli {

namespace {

struct BenchArgs {
  std::vector<std::string> models;
  std::vector<int> prompt{512}, gen{128}, threads{0}, depth{0};
  int reps = 5;
  std::string output = "md";
  bool allow_past_context = false;
};

void check_counts(const std::vector<int>& v, const char* flag, int min) {
  for (int x : v)
    if (x < min)
      fail_field("bench", flag, "counts >= " + std::to_string(min), std::to_string(x));
}

void run(const BenchArgs& a) {
  const perf::BenchFormat format = perf::parse_bench_format(a.output);
  check_counts(a.prompt, "-p", 0);
  check_counts(a.gen, "-n", 0);
  check_counts(a.depth, "-d", 0);
  check_counts(a.threads, "-t", 0);
  if (a.reps < 1) fail_field("bench", "-r", ">= 1", std::to_string(a.reps));
  std::vector<int> threads;
  for (int t : a.threads) threads.push_back(resolve_threads(t, "-t"));
  std::fputs(perf::bench_header(format).c_str(), stdout);
  bool first = true;
  for (const std::string& path : a.models) {
    LoadedModel loaded = load_model({path, "", ""}, TokenizerNeed::optional);
    const perf::BenchModelInfo info = perf::bench_model_info(*loaded.model, path);
    // llama-bench's order: for each thread count and depth, the prompt tests, then the
    // generation tests (a count of 0 is skipped).
    for (int t : threads)
      for (int d : a.depth) {
        std::vector<model::BenchTest> tests;
        for (int p : a.prompt)
          if (p > 0) tests.push_back({p, 0, d, t, a.reps});
        for (int n : a.gen)
          if (n > 0) tests.push_back({0, n, d, t, a.reps});
        for (const model::BenchTest& test : tests) {
          const perf::BenchRecord r =
              perf::run_bench(loaded.model, info, test, a.allow_past_context);
          std::fputs(perf::bench_record(format, r, first).c_str(), stdout);
          std::fflush(stdout);
          first = false;
        }
      }
  }
  std::fputs(perf::bench_footer(format).c_str(), stdout);
}

}  // namespace

void register_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* c = app.add_subcommand(
      "bench", "Engine speed with llama-bench's interface and columns (pp = prompt, tg = generation)");
  c->add_option("-m,--model", args->models, "GGUF model (repeatable)")->required();
  c->add_option("-p,--n-prompt", args->prompt, "prompt tokens, a list (default 512)")->delimiter(',');
  c->add_option("-n,--n-gen", args->gen, "generated tokens, a list (default 128)")->delimiter(',');
  c->add_option("-t,--threads", args->threads,
                "threads, a list (default: the cores present; results do not depend on it)")
      ->delimiter(',');
  c->add_option("-d,--n-depth", args->depth, "tokens already in the KV cache, a list (default 0)")
      ->delimiter(',');
  c->add_option("-r,--repetitions", args->reps, "repetitions of each test (default 5)");
  c->add_option("-o,--output", args->output, "md, csv, json or jsonl (default md)");
  add_past_context_flag(c, args->allow_past_context);
  c->callback([args] { run(*args); });
}

}  // namespace ember::cli
