#pragma once
// The resource limits every command reads the same way (docs/cli-run.md, "Limits"):
//   --threads N             0 or absent: the cores this process may run on; a negative count
//                           is refused; more than the cores present is clamped to them, with a
//                           one-line notice on stderr. Results never depend on the count
//                           (canonical-v1), only the speed does.
//   --allow-past-context    lets prompt + generated positions go past the model's context
//                           length (GGUF `<arch>.context_length`), which is otherwise a checked
//                           limit, refused before anything is evaluated.
#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "model/engine.h"

namespace ember::cli {

// Adds `--threads` (default 0) to `c`.
CLI::Option* add_threads_option(CLI::App* c, int& threads,
                                const std::string& help = "worker threads (default: the cores present; "
                                                          "results do not depend on it)");
// The checked count of `flag`: Error when negative; above cores_available() clamped to it
// (notice on stderr); 0 kept (it means "the cores present" to whoever runs it).
int check_threads(int requested, const std::string& flag = "--threads");
// check_threads, then 0 -> cores_available().
int resolve_threads(int requested, const std::string& flag = "--threads");
// " (the cores present)" when requested was 0, else "" (for run summaries).
std::string threads_origin(int requested);

// Validators for numeric flags, checked on the text before CLI11 converts it: CLI11 2.1 reads
// an unsigned flag with strtoull, which turns "-1" into 2^64-1, saturates 18446744073709551616
// to 2^64-1 and reads "010" as octal 8; a float flag takes any value, -1, inf and nan included.
// A refusal is one line, "<flag>: expected <what>, found <text>" (CLI11 adds its --help hint).
// A seed: a decimal integer in [0, 2^64-1], digits only.
CLI::Validator seed_value();
// A finite decimal number accepted by `ok`, described as `expected` ("a finite number >= 0").
CLI::Validator finite_number(bool (*ok)(double), const std::string& expected);

// Adds `--allow-past-context` to `c`.
CLI::Option* add_past_context_flag(CLI::App* c, bool& allow);

// Checks, before anything is evaluated, that a generation from `input` positions (a prompt,
// or a cache plus its resume token) with `steps` selection steps stays below
// engine.position_limit(): the positions written are input + steps - 1 (the last token
// selected is never evaluated). Error naming `input_where`/`input_field` when the input
// alone is too long, else `steps_flag` with the most steps that fit.
void check_positions(const model::Engine& engine, int64_t input, const std::string& input_where,
                     const std::string& input_field, int64_t steps, const std::string& steps_flag);

// Whether a generation writing `positions` positions goes past the model's context length.
bool past_context(const model::Engine& engine, int64_t positions);

}  // namespace ember::cli
