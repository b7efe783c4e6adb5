#include "serve/metrics.h"

#include <cstdio>

namespace ember::serve {

namespace {

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

void counter(std::string& out, const char* name, const char* help, uint64_t v, const char* type = "counter") {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " +
         std::to_string(v) + "\n";
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double seconds) {
  std::lock_guard lock(mu_);
  size_t i = 0;
  while (i < bounds_.size() && seconds > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += seconds;
  ++count_;
}

std::string Histogram::render(const std::string& name, const std::string& help) const {
  std::lock_guard lock(mu_);
  std::string out = "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += name + "_bucket{le=\"" + number(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(count_) + "\n";
  out += name + "_sum " + number(sum_) + "\n" + name + "_count " + std::to_string(count_) + "\n";
  return out;
}

std::string Metrics::render() const {
  std::string out;
  counter(out, "ember_requests_total", "Generation requests accepted.", requests.load());
  counter(out, "ember_requests_rejected_total", "Requests refused before generating (4xx, 503).",
          requests_rejected.load());
  counter(out, "ember_requests_cancelled_total", "Requests whose client went away or stopped them.",
          requests_cancelled.load());
  counter(out, "ember_prompt_tokens_total", "Prompt tokens of finished requests.", prompt_tokens.load());
  counter(out, "ember_prompt_tokens_cached_total", "Prompt tokens restored from a prefix tier.",
          prompt_tokens_cached.load());
  counter(out, "ember_generated_tokens_total", "Tokens selected.", generated_tokens.load());
  counter(out, "ember_steps_total", "Engine steps (one batched forward pass each).", steps.load());
  counter(out, "ember_step_tokens_total", "Tokens evaluated by engine steps.", step_tokens.load());
  counter(out, "ember_store_errors_total", "Store lookups or saves that failed; the prefix was computed.",
          store_errors.load());
  counter(out, "ember_queue_depth", "Requests waiting for a sequence slot.", uint64_t(queue_depth.load()), "gauge");
  counter(out, "ember_active_sequences", "Sequences being generated.", uint64_t(active_sequences.load()), "gauge");
  out += "# HELP ember_prefix_lookups_total Prompt prefix lookups by the tier that served them (none: miss).\n"
         "# TYPE ember_prefix_lookups_total counter\n";
  for (Tier t : {Tier::none, Tier::ram, Tier::store})
    out += std::string("ember_prefix_lookups_total{tier=\"") + tier_name(t) + "\"} " +
           std::to_string(prefix_hits[size_t(t)].load()) + "\n";
  out += ttft.render("ember_time_to_first_token_seconds", "Submit to the first selected token.");
  out += token_latency.render("ember_inter_token_seconds", "Time between consecutive selected tokens.");
  out += batch_size.render("ember_step_sequences", "Sequences sharing one engine step.");
  return out;
}

}  // namespace ember::serve
