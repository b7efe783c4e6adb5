// Runs the contract-document fuzz harness (fuzz/contract_fuzz.cpp) in every build over its
// seeds, the valid and invalid examples of every schema (schemas/examples/), and over every
// truncation and a spread of single-bit flips of each, so the sanitizer pass in CI is its
// smoke run. The harness fails only by crashing; what the test asserts besides is that the
// seeds are what their names say (valid examples carry no violation of their own schema).
#include <gtest/gtest.h>

#include <filesystem>

#define LLVMFuzzerTestOneInput contract_fuzz_one_input
#include "../../fuzz/contract_fuzz.cpp"
#undef LLVMFuzzerTestOneInput

#include "kv/kv_test_util.h"

namespace ember::contract {
namespace {

void feed(const std::string& in) { contract_fuzz_one_input(reinterpret_cast<const uint8_t*>(in.data()), in.size()); }

TEST(ContractFuzz, ExamplesAndTheirMutationsNeverCrash) {
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(EMBER_SOURCE_DIR) + "/schemas/examples")) {
    const std::string name = e.path().filename().string();
    const std::string text = test::slurp(e.path().string());
    ++files;
    feed(text);
    if (name.find(".valid.") != std::string::npos) {
      const std::string schema = name.substr(0, name.find('.'));
      EXPECT_TRUE(builtin_schema(schema).validate(parse_json_strict(text, name)).empty()) << name;
    }
    for (size_t len = 0; len < text.size(); len += 7) feed(text.substr(0, len));
    for (size_t i = 0; i < text.size(); i += 5) {
      std::string b = text;
      b[i] = char(uint8_t(b[i]) ^ (1u << (i % 8)));
      feed(b);
    }
  }
  EXPECT_GE(files, 10);
}

}  // namespace
}  // namespace ember::contract
