#pragma once
// The flags every command that reaches a store shares (ember store ..., kv replay --store,
// run --store): the password comes from EMBER_REDIS_PASSWORD or --password-file, never argv.
#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "kv/state.h"
#include "store/backend.h"
#include "store/prefix.h"

namespace ember::cli {

void add_password_file_flag(CLI::App* c, std::string& path);
// The options to open a store with: the password from --password-file (its first line) when
// given, else from the environment variable EMBER_REDIS_PASSWORD, else none.
store::BackendOptions store_backend_options(const std::string& password_file);
// The first line of a secret file (a password, an API key), never echoed; Error naming the
// file when it is empty. `what` names the secret in that error.
std::string secret_first_line(const std::string& path, const std::string& what);
// store::open_state with the password as above: every command that reads a state takes a
// directory, a .kvc or a STORE_URI#REF (store/open_state.h) through this.
kv::VerifiedState open_state_ref(const std::string& ref, const kv::ReadOptions& options = {});
// A non-negative decimal integer flag (seconds, bytes), at most 2^62: anything else ("-5",
// "1e3", "", "12abc") is an Error naming the flag, what it expects and what it found.
uint64_t parse_count_flag(const std::string& flag, const std::string& unit, const std::string& text);
// "fail" | "recompute".
store::OnBadState parse_on_bad_state(const std::string& s);

}  // namespace ember::cli
