#include "util/error.h"

#include <cstdio>
#include <cstdlib>

#include "util/printable.h"

namespace ember {

void fail_field(std::string_view where, std::string_view field, std::string_view expected,
                std::string_view found) {
  // Every part may hold text from a file (a path, a JSON key, a found value): escaped, so the
  // message is one line and cannot drive the terminal.
  std::string msg;
  msg.reserve(where.size() + field.size() + expected.size() + found.size() + 32);
  msg.append(printable(where)).append(": ").append(printable(field)).append(": expected ");
  msg.append(printable(expected)).append(", found ").append(printable(found));
  throw Error(msg);
}

void fail(std::string_view where, std::string_view what) {
  std::string msg = printable(where);
  msg.append(": ").append(printable(what));
  throw Error(msg);
}

void check_failed(const char* cond, const char* file, int line) {
  std::fprintf(stderr, "ember: internal invariant failed: %s (%s:%d)\n", cond, file, line);
  std::abort();
}

}  // namespace ember
