// The timing loop of `ember bench` (model/bench.h); its report is perf/bench_report.cpp.
#include "model/bench.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <span>

#include "util/error.h"
#include "util/simd.h"

namespace ember::model {

namespace {

std::vector<int32_t> bench_tokens(int n, int vocab, uint32_t salt) {
  std::vector<int32_t> t(size_t(std::max(n, 0)));
  uint32_t s = 0x9E3779B9u ^ salt;
  for (int32_t& id : t) {
    s = s * 1664525u + 1013904223u;
    id = int32_t((s >> 8) % uint32_t(vocab));
  }
  return t;
}

std::string now_rfc3339() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%FT%TZ", &tm);
  return buf;
}

uint64_t now_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

}  // namespace

namespace {

void check_test(const Engine& engine, const BenchTest& t) {
  if (t.n_prompt + int64_t(t.n_gen) <= 0 || t.n_prompt < 0 || t.n_gen < 0)
    fail_field("bench", "test", "prompt tokens, generated tokens or both (n_prompt + n_gen > 0)",
               "n_prompt " + std::to_string(t.n_prompt) + ", n_gen " + std::to_string(t.n_gen));
  if (t.reps < 1 || t.reps > 100000)
    fail_field("bench", "-r", "1..100000 repetitions", std::to_string(t.reps));
  if (t.n_depth < 0) fail_field("bench", "-d", "a depth >= 0", std::to_string(t.n_depth));
  const int64_t positions = int64_t(t.n_depth) + t.n_prompt + t.n_gen;
  if (positions > engine.position_limit())
    fail_field("bench", "positions",
               "depth + prompt + generated tokens at most " + std::to_string(engine.position_limit()),
               std::to_string(positions) + " (-d " + std::to_string(t.n_depth) + ", -p " +
                   std::to_string(t.n_prompt) + ", -n " + std::to_string(t.n_gen) + ")");
}

}  // namespace

void check_bench_tests(const std::shared_ptr<const Model>& model, const std::vector<BenchTest>& tests,
                       bool allow_past_context) {
  const Engine engine(model, EngineOptions{1, allow_past_context});
  for (const BenchTest& t : tests) check_test(engine, t);
}

BenchTiming time_bench(const std::shared_ptr<const Model>& model, const BenchTest& t,
                       bool allow_past_context) {
  Engine engine(model, EngineOptions{t.threads, allow_past_context});
  check_test(engine, t);
  const int64_t positions = int64_t(t.n_depth) + t.n_prompt + t.n_gen;
  const int vocab = model->config().n_vocab;
  BenchTiming r;
  r.simd = simd_name(active_simd());
  KvCache base = engine.new_cache(int(std::max<int64_t>(positions, 1)));
  if (t.n_depth > 0) {
    const std::vector<int32_t> depth = bench_tokens(t.n_depth, vocab, 1);
    engine.forward(base, depth);
  }
  const std::vector<int32_t> prompt = bench_tokens(t.n_prompt, vocab, 2);
  const std::vector<int32_t> gen = bench_tokens(t.n_gen, vocab, 3);
  auto one_run = [&](int n_gen) {
    KvCache cache = base.copy();
    const uint64_t t0 = now_ns();
    if (t.n_prompt > 0) engine.forward(cache, prompt);
    for (int i = 0; i < n_gen; ++i) engine.forward(cache, std::span(gen.data() + i, 1));
    return now_ns() - t0;
  };
  one_run(t.n_gen > 0 ? 1 : 0);  // warm-up, as llama-bench: the whole prompt, or one step
  r.test_time = now_rfc3339();
  for (int i = 0; i < t.reps; ++i) r.samples_ns.push_back(std::max<uint64_t>(one_run(t.n_gen), 1));
  return r;
}

}  // namespace ember::model
