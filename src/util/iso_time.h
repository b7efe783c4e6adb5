#pragma once
// Times as people and tools read them: ISO-8601 UTC ("2026-12-05T01:23:45Z"), the one format
// ember prints (store listings, report stamps); JSON keeps the unix seconds beside it.
#include <cstdint>
#include <string>

namespace ember {

// "" for a time gmtime cannot represent.
std::string iso8601_utc(int64_t unix_seconds);
std::string iso8601_utc_now();

}  // namespace ember
