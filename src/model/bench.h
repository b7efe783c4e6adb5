#pragma once
// The timing loop of `ember bench`, in llama-bench's terms (docs/engine.md, "ember bench"):
//   a prompt test ppN  = one forward() of N prompt tokens (only the last token's logits),
//   a generation test tgN = N one-token forward() steps,
//   a combined test ppN+tgM = the prompt, then M steps (llama-bench -pg; t/s counts both),
// each after a depth of D tokens already in the cache (evaluated once, untimed, and copied
// into every repetition), repeated `reps` times after one untimed warm-up run.
// Only what needs the engine lives here; the report (llama-bench's CSV/JSON/Markdown, the CPU
// and model-file description) is perf/bench_report.h, a layer above.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/engine.h"

namespace ember::model {

struct BenchTest {
  int n_prompt = 0;  // prompt tokens, one forward() (> 0 for a prompt or combined test)
  int n_gen = 0;     // one-token steps after the prompt (> 0 for a generation or combined test)
  int n_depth = 0;   // tokens in the cache before the timed work
  int threads = 1;
  int reps = 5;
};

struct BenchTiming {
  std::string simd;                  // the SIMD path the engine ran on
  std::string test_time;             // RFC 3339, UTC, when the timed runs started
  std::vector<uint64_t> samples_ns;  // [reps] wall time of each run, >= 1
};

// Error naming the field for the first test that is malformed (neither n_prompt nor n_gen, a
// negative count, reps outside 1..100000) or needs more positions than an engine of `model`
// holds. Cheap: a caller checks every test before it runs (and prints) the first.
void check_bench_tests(const std::shared_ptr<const Model>& model, const std::vector<BenchTest>& tests,
                       bool allow_past_context = false);

// Runs one test, after the same checks. Tokens are deterministic pseudo-random ids below the
// vocabulary size.
BenchTiming time_bench(const std::shared_ptr<const Model>& model, const BenchTest& test,
                       bool allow_past_context = false);

}  // namespace ember::model
