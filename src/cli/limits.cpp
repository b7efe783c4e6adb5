#include "cli/limits.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "util/error.h"
#include "util/printable.h"
#include "util/thread_pool.h"

namespace ember::cli {

CLI::Option* add_threads_option(CLI::App* c, int& threads, const std::string& help) {
  threads = 0;
  return c->add_option("-t,--threads", threads, help);
}

CLI::Validator seed_value() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        static const std::string kMax = "18446744073709551615";  // 2^64 - 1
        bool digits = !text.empty() && text.size() <= kMax.size();
        for (char ch : text) digits = digits && ch >= '0' && ch <= '9';
        if (digits && (text.size() < kMax.size() || text <= kMax) && (text.size() == 1 || text[0] != '0')) return "";
        return "expected a decimal integer in [0, " + kMax + "], found " + printable(text);
      },
      "SEED");
}

CLI::Validator finite_number(bool (*ok)(double), const std::string& expected) {
  return CLI::Validator(
      [ok, expected](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = text.empty() ? NAN : std::strtod(text.c_str(), &end);
        if (end == text.c_str() + text.size() && std::isfinite(v) && ok(v)) return "";
        return "expected " + expected + ", found " + printable(text);
      },
      "NUMBER");
}

int check_threads(int requested, const std::string& flag) {
  if (requested < 0)
    fail_field(flag, "thread count", "0 (the cores present) or a positive count", std::to_string(requested));
  const int cores = cores_available();
  if (requested > cores) {
    std::fprintf(stderr,
                 "ember: %s %d is more than the %d cores present; using %d (results do not "
                 "depend on the count)\n",
                 flag.c_str(), requested, cores, cores);
    return cores;
  }
  return requested;
}

int resolve_threads(int requested, const std::string& flag) {
  const int n = check_threads(requested, flag);
  return n > 0 ? n : cores_available();
}

std::string threads_origin(int requested) { return requested == 0 ? " (the cores present)" : ""; }

CLI::Option* add_past_context_flag(CLI::App* c, bool& allow) {
  return c->add_flag("--allow-past-context", allow,
                     "let prompt + generated positions go past the model's context length "
                     "(recorded in the output)");
}

void check_positions(const model::Engine& engine, int64_t input, const std::string& input_where,
                     const std::string& input_field, int64_t steps, const std::string& steps_flag) {
  const int64_t limit = engine.position_limit();
  const std::string why = engine.options().allow_past_context || limit < engine.config().n_ctx
                              ? " (the most positions a cache holds)"
                              : " (the model's context length; --allow-past-context to go past it)";
  if (input > limit)
    fail_field(input_where, input_field, "at most " + std::to_string(limit) + " positions" + why,
               std::to_string(input));
  if (steps < 1) fail_field(steps_flag, "steps", ">= 1", std::to_string(steps));
  const int64_t most = limit - input + 1;
  if (steps > most)
    fail_field(steps_flag, "steps",
               "at most " + std::to_string(most) + " (with " + std::to_string(input) +
                   " input positions, input + steps - 1 <= " + std::to_string(limit) + ")" + why,
               std::to_string(steps));
}

bool past_context(const model::Engine& engine, int64_t positions) {
  return positions > engine.config().n_ctx;
}

}  // namespace ember::cli
