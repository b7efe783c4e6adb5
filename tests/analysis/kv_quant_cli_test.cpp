// `ember kv perturb --quantize` and `ember study kv-quant` end to end on stories260K.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/cli_run.h"
#include "support/test_support.h"
#include "util/atomic_file.h"

namespace ember::analysis {
namespace {

using test::q;
using test::run_ember;

TEST(KvQuantCli, PerturbQuantizeWritesAReceiptThatCompareApplies) {
  const std::string model = test::shared_path("models/stories260K.gguf");
  const std::string dir = test::temp_dir("kvq-cli");
  ASSERT_EQ(run_ember("kv export --model " + q(model) + " --prompt 'Once upon a time, there was' --output " +
                      q(dir + "/snap")).rc, 0);
  const test::CliRun r = run_ember("kv perturb --snapshot " + q(dir + "/snap") +
                                   " --quantize q4_0 --part k --layers 1,3 --receipt " + q(dir + "/r.json"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("quantize q4_0 rotation llamacpp layers 1,3 part k"), std::string::npos) << r.out;
  const nlohmann::json j = nlohmann::json::parse(read_file(dir + "/r.json"));
  EXPECT_EQ(j["operation"]["kind"], "quantize");
  EXPECT_EQ(j["selection"]["layers"], nlohmann::json::array({1, 3}));
  EXPECT_EQ(j["operation"]["rotation"], "llamacpp");  // the default; head_dim 8: no block
  EXPECT_EQ(j["operation"]["rotation_block"]["k"], 0);
  const test::CliRun c = run_ember("kv compare " + q(dir + "/snap") + " " + q(dir + "/snap") + " --perturb " +
                                   q(dir + "/r.json") + " --model " + q(model) + " --steps 4 --json-out " +
                                   q(dir + "/rep.json"));
  ASSERT_EQ(c.rc, 0) << c.out;
  EXPECT_NE(c.out.find("KL(LEFT || RIGHT)"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("quantize q4_0 (llama.cpp KV cache, rotation llamacpp) layers 1,3 all heads part k"),
            std::string::npos)
      << c.out;
  const nlohmann::json rep = nlohmann::json::parse(read_file(dir + "/rep.json"));
  EXPECT_GT(rep["diagnostics"]["same_input"]["kl"]["mean"].get<double>(), 0.0);
  // --head with --quantize, an unknown type and a missing operation are refused by name.
  EXPECT_NE(run_ember("kv perturb --snapshot " + q(dir + "/snap") + " --quantize q4_0 --part k --head 0 --receipt " +
                      q(dir + "/r2.json")).out.find("--layer/--head"), std::string::npos);
  EXPECT_NE(run_ember("kv perturb --snapshot " + q(dir + "/snap") + " --quantize q6_k --part k --receipt " +
                      q(dir + "/r2.json")).out.find("--quantize"), std::string::npos);
  EXPECT_NE(run_ember("kv perturb --snapshot " + q(dir + "/snap") + " --part k --receipt " + q(dir + "/r2.json"))
                .out.find("operation"), std::string::npos);
  // --rotation: llamacpp or none, only with --quantize.
  EXPECT_NE(run_ember("kv perturb --snapshot " + q(dir + "/snap") + " --quantize q4_0 --part k --rotation hadamard "
                      "--receipt " + q(dir + "/r2.json")).out.find("--rotation: expected llamacpp or none"),
            std::string::npos);
  EXPECT_NE(run_ember("kv perturb --snapshot " + q(dir + "/snap") + " --zero --layer 0 --head 0 --part k "
                      "--rotation none --receipt " + q(dir + "/r2.json")).out.find("--rotation"),
            std::string::npos);
  EXPECT_FALSE(path_exists(dir + "/r2.json"));
}

TEST(KvQuantCli, StudyWritesItsReportsAndRefusesToOverwrite) {
  const std::string model = test::shared_path("models/stories260K.gguf");
  const std::string prompts = test::shared_path("models/prompts-stories-kjv.txt");
  const std::string dir = test::temp_dir("kvq-study");
  const std::string args = "study kv-quant --model " + q(model) + " --prompts " + q(prompts) +
                           " --limit 3 --continuation 4 --types q8_0,iq4_nl --parts kv --json-out " +
                           q(dir + "/s.json") + " --html " + q(dir + "/s.html");
  const test::CliRun r = run_ember(args);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("iq4_nl  kv"), std::string::npos) << r.out;
  const nlohmann::json j = nlohmann::json::parse(read_file(dir + "/s.json"));
  ASSERT_EQ(j["configs"].size(), 2u);
  EXPECT_EQ(j["prompts"]["used"], 3);
  test::expect_report_stamp(read_file(dir + "/s.html"), {model, prompts});
  EXPECT_NE(run_ember(args).rc, 0);  // exists: refused without --force
  EXPECT_NE(run_ember("study kv-quant --model " + q(model) + " --prompts " + q(prompts) + " --types q4_k")
                .out.find("--types"), std::string::npos);
  EXPECT_EQ(j["protocol"]["rotation"], "llamacpp");
  EXPECT_NE(run_ember("study kv-quant --model " + q(model) + " --prompts " + q(prompts) + " --rotation yes")
                .out.find("--rotation"), std::string::npos);
}

}  // namespace
}  // namespace ember::analysis
