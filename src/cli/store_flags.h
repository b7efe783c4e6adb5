#pragma once
// The flags every command that reaches a store shares (ember store ..., kv replay --store,
// run --store): the password comes from EMBER_REDIS_PASSWORD or --password-file, never argv.
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
// store::open_state with the password as above: every command that reads a state takes a
// directory, a .kvc or a STORE_URI#REF (store/open_state.h) through this.
kv::VerifiedState open_state_ref(const std::string& ref, const kv::ReadOptions& options = {});
// "fail" | "recompute".
store::OnMiss parse_on_miss(const std::string& s);

}  // namespace ember::cli
