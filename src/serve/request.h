#pragma once
// One generation request as the scheduler sees it: the prompt ids and parameters going in, a
// channel of selected tokens coming out. The HTTP thread that owns the client creates it,
// hands it to Scheduler::submit, and reads events until it is finished; it may cancel it at any
// time (client gone, stop string matched), and the scheduler frees its sequence at the next
// step boundary.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "model/generate.h"

namespace ember::serve {

// Where the restored prefix of a prompt came from (the response says it, metrics count it).
enum class Tier { none, ram, store };
const char* tier_name(Tier t);

struct GenerationParams {
  model::SamplingParams sampling;  // seed defaults to 0: the same request gives the same bits
  int max_tokens = 16;             // bounded by the context before the request is queued
  bool ignore_eos = false;
  int top_logprobs = -1;           // -1: no logprobs; 0..20: the chosen token's and the top n
};

// The log-probability (natural log, f64 softmax of the f32 logits, rounded to f32) of the
// selected token and of the most likely ones, as OpenAI's `logprobs` reports them.
struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

struct TokenEvent {
  int32_t token = 0;
  std::optional<TokenLogprob> chosen;
  std::vector<TokenLogprob> top;  // most likely first, ties by lower id
};

enum class FinishReason { none, stop, length, cancelled, error };
const char* finish_reason_name(FinishReason r);

class Request {
 public:
  Request(std::vector<int32_t> prompt, GenerationParams params)
      : prompt_(std::move(prompt)), params_(params) {}
  const std::vector<int32_t>& prompt() const { return prompt_; }
  const GenerationParams& params() const { return params_; }

  // --- the owner's side ---
  // Waits for the next event (true), or for the end (false: finished and nothing left).
  bool next(TokenEvent& out);
  // Asks the scheduler to stop generating; idempotent. Its sequence is freed at the next step.
  void cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }
  // Valid once next() returned false.
  FinishReason finish_reason() const;
  std::string error() const;
  int cached_tokens() const;  // prompt positions restored instead of computed
  Tier tier() const;
  double ttft_seconds() const;  // submit to the first selected token

  // --- the scheduler's side ---
  void push(TokenEvent e);
  void restored(int positions, Tier tier);
  void finish(FinishReason reason, std::string error = "");
  std::chrono::steady_clock::time_point submitted_at;

 private:
  std::vector<int32_t> prompt_;
  GenerationParams params_;
  std::atomic<bool> cancelled_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<TokenEvent> events_;
  bool finished_ = false;
  FinishReason reason_ = FinishReason::none;
  std::string error_;
  int cached_ = 0;
  Tier tier_ = Tier::none;
  double ttft_ = 0.0;
  bool first_ = true;
};

}  // namespace ember::serve
