#include "util/progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "util/printable.h"

namespace ember {
namespace {

bool progress_enabled(std::FILE* out) {
  if (const char* env = std::getenv("EMBER_PROGRESS")) {
    if (std::strcmp(env, "0") == 0) return false;
    if (std::strcmp(env, "1") == 0) return true;
  }
  return isatty(fileno(out)) != 0;
}

}  // namespace

std::string format_eta(double seconds) {
  if (!(seconds >= 0) || seconds > 1e7) return "?";
  const auto s = int64_t(std::llround(seconds));
  char buf[32];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(s));
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  else
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>((s % 3600) / 60));
  return buf;
}

Progress::Progress(std::string label, int64_t total, std::string unit)
    : label_(printable(label)), unit_(printable(unit)), total_(total < 0 ? 0 : total),
      enabled_(progress_enabled(stderr)), start_(Clock::now()), last_draw_(start_) {}

Progress::~Progress() { finish(); }

std::string Progress::line() const {
  const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
  const double rate = elapsed > 0 ? double(done_) / elapsed : 0.0;
  char buf[96];
  std::string s = label_ + "  " + std::to_string(done_);
  if (total_ > 0) s += "/" + std::to_string(total_);
  s += " " + unit_;
  std::snprintf(buf, sizeof buf, "  %.3g/s", rate);
  s += buf;
  if (total_ > 0 && done_ > 0 && done_ < total_)
    s += "  ETA " + format_eta(double(total_ - done_) / rate);
  return s;
}

void Progress::update(int64_t done) {
  if (done <= done_) return;
  done_ = done;
  if (!enabled_) return;
  const auto now = Clock::now();
  if (drawn_ && now - last_draw_ < std::chrono::milliseconds(250) && done_ != total_) return;
  last_draw_ = now;
  const std::string s = line();
  // Pad over a longer previous line instead of using an erase-line escape.
  const size_t pad = last_width_ > s.size() ? last_width_ - s.size() : 0;
  std::fprintf(out_, "\r%s%*s", s.c_str(), int(pad), "");
  std::fflush(out_);
  last_width_ = s.size();
  drawn_ = true;
}

void Progress::finish() {
  if (!drawn_) return;
  std::fprintf(out_, "\r%*s\r", int(last_width_), "");
  std::fflush(out_);
  drawn_ = false;
}

}  // namespace ember
