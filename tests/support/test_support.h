#pragma once
// Helpers shared by every test executable.
#include <functional>
#include <string>
#include <vector>

#include "util/simd.h"

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
// 64 copies of one hex digit: a well-formed stand-in for a SHA-256 where only its shape matters.
inline std::string hex64(char digit) { return std::string(64, digit); }
// The message of the ember::Error that fn throws, or "" when it throws none: the one way
// tests read an error line to compare it.
std::string error_of(const std::function<void()>& fn);
// The SIMD paths a bit-exactness test compares: supported_simd_levels(), and the test's output
// says which ran and which this CPU lacks ("[ SIMD ] ran: scalar avx2; skipped: avx512 ..."),
// so a green run on an AVX2-only machine is not mistaken for an AVX-512 check.
std::vector<SimdLevel> simd_levels_under_test();

}  // namespace ember::test
