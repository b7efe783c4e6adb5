#pragma once
// Helpers shared by every test executable.
#include <string>
#include <vector>

namespace ember::test {

// ../shared beside the checkout (EMBER_SHARED overrides). Real-model tests must FAIL, not
// skip, when a file is missing: use shared_path(), which asserts existence.
std::string shared_dir();
std::string shared_path(const std::string& relative);
// A fresh empty directory under the build's temp area, removed at process exit.
std::string temp_dir(const std::string& tag);
// The built `ember` binary.
std::string ember_binary();
// Runs a shell command; returns its exit status and captures stdout+stderr.
int run_command(const std::string& cmd, std::string* output = nullptr);
std::vector<uint8_t> read_bytes(const std::string& path);

}  // namespace ember::test
