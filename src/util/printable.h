#pragma once
// Text from files (manifest fields, GGUF names and metadata, JSON keys) made safe for a
// terminal and for one-line messages. Every error message (fail/fail_field, and the CLI's one
// place that prints errors) and every text table that shows strings from files goes through it.
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

namespace ember {

// Valid UTF-8 is kept, except what a terminal or a reader would act on: C0 controls (NUL,
// ESC, CR, LF, TAB, ...) and DEL become \xNN; C1 controls (U+0080..U+009F, e.g. the 8-bit CSI)
// and the bidirectional overrides and isolates (U+202A..U+202E, U+2066..U+2069) become
// \uNNNN; each byte of invalid UTF-8 becomes \xNN. The result is valid UTF-8 without control
// characters, and printable(printable(s)) == printable(s) (a backslash is kept as is, so a
// file's literal "\x1b" reads the same as an escaped ESC: safe, not reversible).
std::string printable(std::string_view s);

// JSON for a terminal or a pipe (`--json` on stdout): ASCII only, so a bidi override or a C1
// control in a string from a file reads as \u202e / \u009b, never acts; invalid UTF-8 (which
// nlohmann's plain dump() throws on, a raw exception message) becomes U+FFFD, escaped. The
// document means the same to any JSON reader. `indent` as in dump() (-1: one line).
std::string printable_json(const nlohmann::json& j, int indent = -1);
std::string printable_json(const nlohmann::ordered_json& j, int indent = -1);

}  // namespace ember
