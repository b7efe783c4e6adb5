// The scheduler's promise: a request's tokens and logprobs are the bits of running it alone
// (model::generate on a fresh cache), whatever else shares its steps, however many slots,
// threads and step budgets, cold or restored from the RAM prefix tier.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "model/engine.h"
#include "model/generate.h"
#include "model/tiny_model.h"
#include "serve/scheduler.h"

namespace ember::serve {
namespace {

struct Case {
  std::vector<int32_t> prompt;
  GenerationParams params;
};

struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  FinishReason reason = FinishReason::none;
  int cached = 0;
};

// The reference: the prompt alone through model::generate, logprobs from its logits.
Outcome alone(const std::shared_ptr<const model::Model>& m, const Case& c) {
  model::Engine e(m, model::EngineOptions{1});
  model::KvCache cache = e.new_cache(int(c.prompt.size()));
  model::Sampler sampler(c.params.sampling);
  model::GenerateOptions opt;
  opt.max_steps = c.params.max_tokens;
  Outcome o;
  const int V = m->config().n_vocab;
  model::generate(e, cache, c.prompt, opt, sampler, [&](int, std::span<const float> logits, int32_t token) {
    o.tokens.push_back(token);
    double mx = -INFINITY, sum = 0;
    for (int i = 0; i < V; ++i) mx = std::max(mx, double(logits[size_t(i)]));
    for (int i = 0; i < V; ++i) sum += std::exp(double(logits[size_t(i)]) - mx);
    o.logprobs.push_back(float(double(logits[size_t(token)]) - (mx + std::log(sum))));
  });
  o.reason = FinishReason::length;
  return o;
}

Outcome drain(Request& r) {
  Outcome o;
  TokenEvent e;
  while (r.next(e)) {
    o.tokens.push_back(e.token);
    o.logprobs.push_back(e.chosen ? e.chosen->logprob : 0.0f);
  }
  o.reason = r.finish_reason();
  o.cached = r.cached_tokens();
  return o;
}

std::vector<Case> cases(int vocab, std::mt19937& rng) {
  std::vector<Case> out;
  for (int i = 0; i < 10; ++i) {
    Case c;
    // Prompts sharing a 32-token prefix in pairs, so RAM hits happen mid-run.
    const int len = 20 + int(rng() % 60);
    for (int t = 0; t < len; ++t)
      c.prompt.push_back(int32_t((t < 32 ? t * 7 + (i / 2) * 13 : t * 31 + i * 5) % vocab));
    c.params.max_tokens = 4 + int(rng() % 12);
    c.params.top_logprobs = 0;
    if (i % 3 == 1) {
      c.params.sampling.temperature = 0.9f;
      c.params.sampling.top_k = 20;
      c.params.sampling.seed = 1000 + uint64_t(i);
    }
    out.push_back(c);
  }
  return out;
}

void expect_same(const Outcome& got, const Outcome& want, const std::string& what) {
  EXPECT_EQ(got.tokens, want.tokens) << what;
  ASSERT_EQ(got.logprobs.size(), want.logprobs.size()) << what;
  EXPECT_EQ(std::memcmp(got.logprobs.data(), want.logprobs.data(), 4 * want.logprobs.size()), 0) << what << ": logprobs";
  EXPECT_EQ(got.reason, FinishReason::length) << what;
}

TEST(Scheduler, ConcurrentRequestsEqualEachAloneAcrossSlotsThreadsAndBudgets) {
  std::mt19937 rng(7);
  for (const char* arch : {"llama", "qwen2"}) {
    test::TinySpec spec;
    spec.arch = arch;
    spec.bias = spec.arch == "qwen2";
    auto m = test::make_tiny_model(spec);
    const std::vector<Case> cs = cases(spec.vocab, rng);
    std::vector<Outcome> want;
    for (const Case& c : cs) want.push_back(alone(m, c));
    for (int parallel : {1, 3, 8}) {
      const int threads = 1 + parallel % 3;
      const int budget = parallel == 3 ? 7 : 512;  // 7: prefills split into many chunks
      SCOPED_TRACE(std::string(arch) + ", " + std::to_string(parallel) + " slots, " + std::to_string(threads) +
                   " threads, step budget " + std::to_string(budget));
      model::Engine engine(m, model::EngineOptions{threads});
      Metrics metrics;
      SchedulerOptions so;
      so.parallel = parallel;
      so.step_tokens = budget;
      Scheduler s(engine, so, metrics);
      // Twice: the second round finds the prompts' prefixes in RAM.
      for (int round = 0; round < 2; ++round) {
        std::vector<std::shared_ptr<Request>> rs;
        for (const Case& c : cs) {
          rs.push_back(std::make_shared<Request>(c.prompt, c.params));
          ASSERT_TRUE(s.submit(rs.back()));
        }
        int cached = 0;
        for (size_t i = 0; i < rs.size(); ++i) {
          const Outcome got = drain(*rs[i]);
          expect_same(got, want[i], "request " + std::to_string(i) + " round " + std::to_string(round));
          cached += got.cached;
        }
        if (round == 1) {
          EXPECT_GT(cached, 0) << "the second round restores prefixes from RAM";
        }
      }
      EXPECT_GT(metrics.prefix_hits[size_t(Tier::ram)].load(), 0u);
    }
  }
}

TEST(Scheduler, CancelledRequestFreesItsSlotAndOthersGoOn) {
  auto m = test::make_tiny_model(test::TinySpec{});
  model::Engine engine(m, model::EngineOptions{1});
  Metrics metrics;
  SchedulerOptions so;
  so.parallel = 2;
  Scheduler s(engine, so, metrics);
  GenerationParams long_run;
  long_run.max_tokens = 10000;  // bounded by the context below
  long_run.ignore_eos = true;
  std::vector<int32_t> prompt = {1, 2, 3, 4, 5};
  auto r = std::make_shared<Request>(prompt, long_run);
  ASSERT_TRUE(s.submit(r));
  TokenEvent e;
  ASSERT_TRUE(r->next(e));
  r->cancel();
  while (r->next(e)) {
  }
  EXPECT_EQ(r->finish_reason(), FinishReason::cancelled);
  GenerationParams short_run;
  short_run.max_tokens = 3;
  auto other = std::make_shared<Request>(prompt, short_run);
  ASSERT_TRUE(s.submit(other));
  int n = 0;
  while (other->next(e)) ++n;
  EXPECT_EQ(n, 3);
  for (int i = 0; i < 100 && metrics.requests_cancelled.load() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(metrics.requests_cancelled.load(), 1u);
  // The slot view is refreshed after the step that finished the request.
  auto busy = [&] {
    int n_busy = 0;
    for (const SlotState& st : s.slots()) n_busy += st.busy;
    return n_busy;
  };
  for (int i = 0; i < 100 && busy() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(busy(), 0);
}

TEST(Scheduler, FullQueueRefusesAndStopCancelsWhatIsLeft) {
  auto m = test::make_tiny_model(test::TinySpec{});
  model::Engine engine(m, model::EngineOptions{1});
  Metrics metrics;
  SchedulerOptions so;
  so.parallel = 1;
  so.queue = 2;
  Scheduler s(engine, so, metrics);
  GenerationParams p;
  p.max_tokens = 100000;
  p.ignore_eos = true;
  std::vector<std::shared_ptr<Request>> rs;
  int accepted = 0;
  for (int i = 0; i < 6; ++i) {
    rs.push_back(std::make_shared<Request>(std::vector<int32_t>{1, 2, 3}, p));
    accepted += s.submit(rs.back());
  }
  EXPECT_LE(accepted, 3);  // one running, two waiting
  EXPECT_GE(accepted, 2);
  s.stop(std::chrono::milliseconds(50));
  for (int i = 0; i < accepted; ++i) {
    TokenEvent e;
    while (rs[size_t(i)]->next(e)) {
    }
    EXPECT_NE(rs[size_t(i)]->finish_reason(), FinishReason::none);
  }
  EXPECT_FALSE(s.submit(std::make_shared<Request>(std::vector<int32_t>{1}, p)));
}

}  // namespace
}  // namespace ember::serve
