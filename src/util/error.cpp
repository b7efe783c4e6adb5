#include "util/error.h"

#include <cstdio>
#include <cstdlib>

namespace ember {

void fail_field(std::string_view where, std::string_view field, std::string_view expected,
                std::string_view found) {
  std::string msg;
  msg.reserve(where.size() + field.size() + expected.size() + found.size() + 32);
  msg.append(where).append(": ").append(field).append(": expected ").append(expected);
  msg.append(", found ").append(found);
  throw Error(msg);
}

void fail(std::string_view where, std::string_view what) {
  std::string msg(where);
  msg.append(": ").append(what);
  throw Error(msg);
}

void check_failed(const char* cond, const char* file, int line) {
  std::fprintf(stderr, "ember: internal invariant failed: %s (%s:%d)\n", cond, file, line);
  std::abort();
}

}  // namespace ember
