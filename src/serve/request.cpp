#include "serve/request.h"

namespace ember::serve {

const char* tier_name(Tier t) {
  switch (t) {
    case Tier::ram: return "ram";
    case Tier::store: return "store";
    case Tier::none: break;
  }
  return "none";
}

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::stop: return "stop";
    case FinishReason::length: return "length";
    case FinishReason::cancelled: return "cancelled";
    case FinishReason::error: return "error";
    case FinishReason::none: break;
  }
  return "none";
}

bool Request::next(TokenEvent& out) {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return !events_.empty() || finished_; });
  if (events_.empty()) return false;
  out = std::move(events_.front());
  events_.pop_front();
  return true;
}

FinishReason Request::finish_reason() const {
  std::lock_guard lock(mu_);
  return reason_;
}

std::string Request::error() const {
  std::lock_guard lock(mu_);
  return error_;
}

int Request::cached_tokens() const {
  std::lock_guard lock(mu_);
  return cached_;
}

Tier Request::tier() const {
  std::lock_guard lock(mu_);
  return tier_;
}

double Request::ttft_seconds() const {
  std::lock_guard lock(mu_);
  return ttft_;
}

void Request::push(TokenEvent e) {
  {
    std::lock_guard lock(mu_);
    if (first_) {
      ttft_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - submitted_at).count();
      first_ = false;
    }
    events_.push_back(std::move(e));
  }
  cv_.notify_all();
}

void Request::restored(int positions, Tier tier) {
  std::lock_guard lock(mu_);
  cached_ = positions;
  tier_ = tier;
}

void Request::finish(FinishReason reason, std::string error) {
  {
    std::lock_guard lock(mu_);
    if (finished_) return;
    finished_ = true;
    reason_ = reason;
    error_ = std::move(error);
  }
  cv_.notify_all();
}

}  // namespace ember::serve
