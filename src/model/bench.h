#pragma once
// The timing loop of `ember bench`, in llama-bench's terms (docs/engine.md, "ember bench"):
//   a prompt test ppN  = one forward() of N prompt tokens (only the last token's logits),
//   a generation test tgN = N one-token forward() steps,
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
  int n_prompt = 0;  // > 0 for a prompt test (then n_gen == 0)
  int n_gen = 0;     // > 0 for a generation test (then n_prompt == 0)
  int n_depth = 0;   // tokens in the cache before the timed work
  int threads = 1;
  int reps = 5;
};

struct BenchTiming {
  std::string simd;                  // the SIMD path the engine ran on
  std::string test_time;             // RFC 3339, UTC, when the timed runs started
  std::vector<uint64_t> samples_ns;  // [reps] wall time of each run, >= 1
};

// Runs one test. Error naming the field when the test is malformed (both or neither of
// n_prompt / n_gen, reps < 1, negative depth) or needs more positions than the engine holds.
// Tokens are deterministic pseudo-random ids below the vocabulary size.
BenchTiming time_bench(const std::shared_ptr<const Model>& model, const BenchTest& test,
                       bool allow_past_context = false);

}  // namespace ember::model
