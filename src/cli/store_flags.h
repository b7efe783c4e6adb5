#pragma once
// The flags every command that reaches a store shares (ember store ..., kv replay --store,
// run --store): the password comes from EMBER_REDIS_PASSWORD or --password-file, never argv.
#include <string>

#include <CLI/CLI.hpp>

#include "store/backend.h"
#include "store/prefix.h"

namespace ember::cli {

void add_password_file_flag(CLI::App* c, std::string& path);
// The options to open a store with: the password from --password-file (its first line) when
// given, else from the environment variable EMBER_REDIS_PASSWORD, else none.
store::BackendOptions store_backend_options(const std::string& password_file);
// "fail" | "recompute".
store::OnMiss parse_on_miss(const std::string& s);

}  // namespace ember::cli
