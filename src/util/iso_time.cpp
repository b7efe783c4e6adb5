#include "util/iso_time.h"

#include <ctime>

namespace ember {

std::string iso8601_utc(int64_t unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm utc{};
  char buf[40];
  if (gmtime_r(&t, &utc) == nullptr || std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc) == 0) return "";
  return buf;
}

std::string iso8601_utc_now() { return iso8601_utc(int64_t(std::time(nullptr))); }

}  // namespace ember
