#pragma once
// Progress of work that runs for minutes (map collect / fit, study sweep, kv matrix, studies):
// one status line on standard error, redrawn in place, only when standard error is a terminal
// (logs, pipes and CI see nothing), at most four times a second. It shows the label, items
// done of the total, the rate, and the time left at that rate:
//
//   collect  37/320 prompts  2.4/s  ETA 1m58s
//
// EMBER_PROGRESS=0 turns it off on a terminal too; EMBER_PROGRESS=1 forces it on (tests).
// The label goes through printable(): it may hold a file name.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace ember {

class Progress {
 public:
  // total may be 0 when unknown (no ETA is shown then). unit names the items ("prompts").
  Progress(std::string label, int64_t total, std::string unit = "items");
  ~Progress();  // finish()es
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Sets the count of items done (monotone; a smaller value is ignored) and redraws if due.
  void update(int64_t done);
  void step() { update(done_ + 1); }
  // Clears the status line (the summary is the caller's to print). Idempotent.
  void finish();

  bool shown() const { return enabled_; }
  // The line that would be drawn now (tests): no terminal control characters.
  std::string line() const;

 private:
  using Clock = std::chrono::steady_clock;
  std::string label_, unit_;
  int64_t total_ = 0, done_ = 0;
  bool enabled_ = false, drawn_ = false;
  size_t last_width_ = 0;
  Clock::time_point start_, last_draw_;
  std::FILE* out_ = stderr;
};

// "1m58s", "45s", "2h03m": a duration for a status line.
std::string format_eta(double seconds);

}  // namespace ember
