#pragma once
// llama-bench's syntax for the values of `ember bench`'s test flags, so its command lines run
// unchanged (docs/engine.md, "ember bench"):
//   -p/-n/-d/-t: a comma-separated list whose items are N, FIRST-LAST (step 1),
//                FIRST-LAST+STEP or FIRST-LAST*FACTOR, e.g. "64-256+64" is 64,128,192,256;
//   -pg:         PP,TG, a test of PP prompt tokens and then TG generated ones ("pp64+tg16").
// Errors name the flag, what was expected and what was found.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ember::perf {

// The counts of one flag's value, in order (duplicates kept, as llama-bench). Counts are
// >= 0, a range's LAST >= FIRST, STEP >= 1, FACTOR >= 2, and a list holds at most 4096 counts.
std::vector<int> parse_bench_counts(const std::string& text, std::string_view flag);

// -pg's PP,TG (each >= 0, not both 0).
std::pair<int, int> parse_bench_pg(const std::string& text);

}  // namespace ember::perf
