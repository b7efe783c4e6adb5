#pragma once
// The server's counters and latency histograms, rendered in Prometheus' text exposition
// format (version 0.0.4) at /metrics. Thread-safe: HTTP threads and the scheduler update it.
#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "serve/request.h"

namespace ember::serve {

// A cumulative histogram with fixed upper bounds in seconds.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double seconds);
  // "<name>_bucket{le=...} n" lines, then _sum and _count.
  std::string render(const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // per bound, plus +Inf
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

struct Metrics {
  std::atomic<uint64_t> requests{0};           // generation requests accepted into the queue
  std::atomic<uint64_t> requests_rejected{0};  // 4xx/503 before generating
  std::atomic<uint64_t> requests_cancelled{0};
  std::atomic<uint64_t> prompt_tokens{0};      // prompt positions of finished requests
  std::atomic<uint64_t> prompt_tokens_cached{0};
  std::atomic<uint64_t> generated_tokens{0};
  std::atomic<uint64_t> steps{0};              // engine steps
  std::atomic<uint64_t> step_tokens{0};        // tokens evaluated by those steps
  std::atomic<uint64_t> store_errors{0};       // store unreachable or a state refused: computed instead
  std::atomic<int64_t> queue_depth{0};
  std::atomic<int64_t> active_sequences{0};
  std::array<std::atomic<uint64_t>, 3> prefix_hits{};  // by Tier (none = misses)
  Histogram ttft{{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}};
  Histogram token_latency{{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}};
  Histogram batch_size{{1, 2, 3, 4, 6, 8, 12, 16, 32}};  // sequences per step (not seconds)

  std::string render() const;
};

}  // namespace ember::serve
