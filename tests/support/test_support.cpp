#include "support/test_support.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "util/error.h"

namespace ember::test {

std::string shared_dir() {
  if (const char* env = std::getenv("EMBER_SHARED"); env && *env) return env;
  return EMBER_SHARED_DIR;
}

std::string shared_path(const std::string& relative) {
  std::string p = shared_dir() + "/" + relative;
  if (!std::filesystem::exists(p)) {
    ADD_FAILURE() << "required shared file missing: " << p;
  }
  return p;
}

namespace {
struct TempRoot {
  std::string path;
  TempRoot() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ember-test-XXXXXX").string();
    char* made = ::mkdtemp(tmpl.data());
    path = made ? made : "/tmp";
  }
  ~TempRoot() {
    std::error_code ec;
    if (path != "/tmp") std::filesystem::remove_all(path, ec);
  }
};
TempRoot& temp_root() {
  static TempRoot root;
  return root;
}
int g_counter = 0;
}  // namespace

std::string temp_dir(const std::string& tag) {
  std::string p = temp_root().path + "/" + tag + "-" + std::to_string(g_counter++);
  std::filesystem::create_directories(p);
  return p;
}

std::string ember_binary() { return EMBER_BINARY; }

int run_command(const std::string& cmd, std::string* output) {
  std::string full = cmd + " 2>&1";
  FILE* p = ::popen(full.c_str(), "r");
  if (!p) return -1;
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = ::pclose(p);
  if (output) *output = out;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

std::vector<SimdLevel> simd_levels_under_test() {
  const std::vector<SimdLevel> levels = supported_simd_levels();
  std::string ran, skipped;
  for (SimdLevel l : all_simd_levels()) {
    bool have = false;
    for (SimdLevel x : levels) have = have || x == l;
    (have ? ran : skipped) += std::string(" ") + simd_name(l);
  }
  // Once per test, however often a test asks inside its loops.
  static std::string last_test;
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "";
  if (name != last_test) {
    last_test = name;
    std::printf("[ SIMD     ] ran:%s; skipped (not on this CPU):%s\n", ran.c_str(),
                skipped.empty() ? " none" : skipped.c_str());
    ::testing::Test::RecordProperty("simd_paths_run", ran);
  }
  return levels;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace ember::test
