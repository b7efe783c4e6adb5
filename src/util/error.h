#pragma once
// Errors at I/O and CLI boundaries. Every message is one line that names where (a file or a
// field), what was expected and what was found, so a user can act on it without a debugger.
#include <stdexcept>
#include <string>
#include <string_view>

namespace ember {

// The one exception type ember throws for bad input or a failed contract. The CLI prints
// what() as "ember: <message>" and exits non-zero.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws Error("<where>: <field>: expected <expected>, found <found>"), each part through
// printable() (util/printable.h): control characters and invalid UTF-8 escaped, one line.
[[noreturn]] void fail_field(std::string_view where, std::string_view field,
                             std::string_view expected, std::string_view found);

// Throws Error("<where>: <what>"), both parts through printable().
[[noreturn]] void fail(std::string_view where, std::string_view what);

// Always-on invariant check for internal logic errors (not for user input).
#define EMBER_CHECK(cond)                                                                 \
  do {                                                                                    \
    if (!(cond)) ::ember::check_failed(#cond, __FILE__, __LINE__);                        \
  } while (0)
[[noreturn]] void check_failed(const char* cond, const char* file, int line);

// The same check for hot loops (per task, per row), where an always-on branch would cost
// measurable time: compiled out under NDEBUG (Release and RelWithDebInfo; the condition is
// not evaluated), unless EMBER_DCHECK_ON is defined, as the sanitizer build does
// (EMBER_SANITIZE in CMakeLists.txt), so ASan/UBSan runs check them. Conditions must have no
// side effects.
#if defined(NDEBUG) && !defined(EMBER_DCHECK_ON)
#define EMBER_DCHECK(cond) \
  do {                     \
    (void)sizeof(!(cond)); \
  } while (0)
#else
#define EMBER_DCHECK(cond) EMBER_CHECK(cond)
#endif

}  // namespace ember
