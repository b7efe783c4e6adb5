#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "contract/json_schema.h"
#include "contract/pack.h"
#include "contract/receipt.h"
#include "support/test_support.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json_strict.h"

namespace ember::contract {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const std::string kExamples = std::string(EMBER_SOURCE_DIR) + "/schemas/examples";

TEST(Schemas, AllBuiltInSchemasCompile) {
  const auto names = builtin_schema_names();
  for (const char* want : {"bridge-receipt", "domcap1", "parity-receipt", "tool-allowlist", "translator-registry"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
}

TEST(Schemas, EveryExampleIsJudgedAsItsNameSays) {
  int n_valid = 0, n_invalid = 0;
  for (const auto& entry : fs::directory_iterator(kExamples)) {
    const std::string name = entry.path().filename().string();
    const bool want_valid = name.find(".valid.") != std::string::npos;
    ASSERT_TRUE(want_valid || name.find(".invalid.") != std::string::npos) << name;
    const DocumentCheck c = validate_file(entry.path().string());
    EXPECT_EQ(c.errors.empty(), want_valid) << name << (c.errors.empty() ? "" : ": " + c.errors.front());
    EXPECT_EQ(c.schema, name.substr(0, name.find('.'))) << name;
    (want_valid ? n_valid : n_invalid)++;
  }
  EXPECT_GE(n_valid, 5);
  EXPECT_GE(n_invalid, 10);
}

TEST(Schemas, UnsupportedKeywordIsRefusedAtCompile) {
  json s = {{"type", "string"}, {"format", "email"}};
  EXPECT_THROW(JsonSchema::compile(s, "t"), Error);
  json r = {{"$ref", "#/$defs/missing"}};
  EXPECT_THROW(JsonSchema::compile(r, "t"), Error);
}

TEST(Schemas, IntegerAndEqualitySemanticsFollowTheSpec) {
  auto s = JsonSchema::compile(json::parse(R"({"type":"integer","enum":[1,2]})"), "t");
  EXPECT_TRUE(s.validate(json::parse("1.0")).empty());  // 1.0 is an integer in 2020-12
  EXPECT_FALSE(s.validate(json::parse("true")).empty());
  EXPECT_FALSE(s.validate(json::parse("1.5")).empty());
  auto len = JsonSchema::compile(json::parse(R"({"type":"string","maxLength":2})"), "t");
  EXPECT_TRUE(len.validate(json("\xd8\xb3\xd9\x84")).empty());  // two code points, four bytes
  EXPECT_FALSE(len.validate(json("abc")).empty());
}

TEST(StrictJson, RefusesDuplicateKeysAndDeepNesting) {
  EXPECT_THROW(parse_json_strict(R"({"a":1,"a":2})", "t"), Error);
  EXPECT_THROW(parse_json_strict(R"({"a":{"b":1,"b":1}})", "t"), Error);
  EXPECT_NO_THROW(parse_json_strict(R"({"a":{"b":1},"c":{"b":1}})", "t"));
  EXPECT_THROW(parse_json_strict(std::string(100, '[') + std::string(100, ']'), "t"), Error);
  EXPECT_THROW(parse_json_strict("{\"a\":\"\xff\"}", "t"), Error);
  EXPECT_THROW(parse_json_strict("{} x", "t"), Error);
}

BridgeReceipt ridge_receipt() {
  BridgeReceipt r;
  r.relation = "cross-model";
  r.source = {test::hex64('a'), "llama", test::hex64('c'), "a.gguf"};
  r.target = {test::hex64('b'), "llama", test::hex64('c'), ""};
  r.kind = "ridge";
  r.mapper_hash = test::hex64('d');
  r.lambda = 0.01;
  r.calibration = Calibration{test::hex64('e'), 32, 8};
  r.held_out = true;
  r.metrics["k_r2_mean"] = 0.9;
  r.created_by = "test";
  return r;
}

TEST(Receipt, BuilderProducesValidResearchReceipt) {
  const auto errors = validate_receipt(ridge_receipt().to_json());
  EXPECT_TRUE(errors.empty()) << errors.front();
}

TEST(Receipt, ValidatedWithoutEvidenceIsRejected) {
  BridgeReceipt r = ridge_receipt();
  r.status = "validated";
  EXPECT_FALSE(validate_receipt(r.to_json()).empty());
  r.n_comparisons = 48;
  r.metrics["next_token_agreement"] = 1.0;
  r.metrics["mean_rel_logit_error"] = 0.05;
  EXPECT_FALSE(validate_receipt(r.to_json()).empty()) << "still no evidence item";
  r.evidence.push_back({"held-out-evaluation", test::hex64('f'), "", "48 held-out prompts"});
  const auto errors = validate_receipt(r.to_json());
  EXPECT_TRUE(errors.empty()) << errors.front();
  r.held_out = false;
  EXPECT_FALSE(validate_receipt(r.to_json()).empty()) << "validated on training data";
}

TEST(Receipt, NanMetricAndUnknownMetricAreRejected) {
  BridgeReceipt r = ridge_receipt();
  r.metrics["k_r2_mean"] = std::nan("");
  EXPECT_FALSE(validate_receipt(r.to_json()).empty());
  r = ridge_receipt();
  r.metrics["accuracy_vibes"] = 1.0;
  EXPECT_FALSE(validate_receipt(r.to_json()).empty());
}

TEST(Receipt, WriteRefusesInvalidAndWritesValid) {
  const std::string dir = test::temp_dir("receipt");
  BridgeReceipt bad = ridge_receipt();
  bad.mapper_hash.clear();  // a ridge map without its mapper
  EXPECT_THROW(write_receipt(dir + "/bad.json", bad, false), Error);
  EXPECT_FALSE(path_exists(dir + "/bad.json"));
  write_receipt(dir + "/ok.json", ridge_receipt(), false);
  EXPECT_TRUE(validate_file(dir + "/ok.json").errors.empty());
  EXPECT_THROW(write_receipt(dir + "/ok.json", ridge_receipt(), false), Error);  // no --force
}

// The relation label (quantization-boundary | same-base | cross-model) is required, checked
// against the list, and a v1 receipt (which had none) is refused by name.
TEST(Receipt, RelationIsRequiredAndV1IsRefusedByName) {
  BridgeReceipt r = ridge_receipt();
  for (const char* rel : {"quantization-boundary", "same-base", "cross-model"}) {
    r.relation = rel;
    EXPECT_TRUE(validate_receipt(r.to_json()).empty()) << rel;
    EXPECT_EQ(r.to_json()["translator"]["relation"], rel);
  }
  r.relation = "similar";
  EXPECT_FALSE(validate_receipt(r.to_json()).empty());
  json j = ridge_receipt().to_json();
  j["translator"].erase("relation");
  EXPECT_FALSE(validate_receipt(j).empty());
  j = ridge_receipt().to_json();
  j["format"] = "ember.bridge-receipt.v1";
  const std::string e = test::error_of([&] { validate_document(j, "old.json"); });
  EXPECT_NE(e.find("old.json: format: expected ember.bridge-receipt.v2 (v1 receipts carry no relation label"),
            std::string::npos)
      << e;
}

TEST(Receipt, UnknownFormatIsANamedError) {
  try {
    validate_document(json{{"format", "ember.whatever"}}, "x.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("format"), std::string::npos) << e.what();
  }
}

// --- capability packs ---

struct PackFixture : ::testing::Test {
  std::string dir = test::temp_dir("pack");
  json pack = parse_json_strict(read_file(kExamples + "/domcap1.valid.analytics-hotshot.json"), "pack");
  ToolAllowlist allow = ToolAllowlist::load(kExamples + "/tool-allowlist.valid.host.json");
  std::string write(const json& j) {
    const std::string p = dir + "/p" + std::to_string(n++) + ".json";
    write_file_atomic(p, j.dump(), false);
    return p;
  }
  int n = 0;
};

TEST_F(PackFixture, ValidPackPasses) {
  const PackReport r = check_pack(write(pack), allow, PackLimits{}, nullptr);
  EXPECT_TRUE(r.ok()) << r.errors.front();
  EXPECT_EQ(r.briefing_chars, utf8_length(pack["briefing"]["text"].get<std::string>()));
  EXPECT_EQ(r.tools, (std::vector<std::string>{"sql.query", "table.describe"}));
}

TEST_F(PackFixture, ToolOutsideAllowlistIsRefused) {
  pack["tools"].push_back("shell.exec");
  const PackReport r = check_pack(write(pack), allow, PackLimits{}, nullptr);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].rfind("tool-not-allowed:", 0), 0u) << r.errors[0];
  EXPECT_NE(r.errors[0].find("shell.exec"), std::string::npos);
  EXPECT_THROW(load_validated_pack(write(pack), allow, PackLimits{}, nullptr), Error);
}

TEST_F(PackFixture, OversizedBriefingIsRefusedByPackAndHostLimits) {
  PackLimits host;
  host.max_chars = 100;  // the example briefing is longer
  PackReport r = check_pack(write(pack), allow, host, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.errors[0].rfind("briefing-too-long:", 0), 0u) << r.errors[0];
  pack["briefing"]["max_chars"] = 10;  // the pack's own bound
  r = check_pack(write(pack), allow, PackLimits{}, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.errors[0].rfind("briefing-too-long:", 0), 0u) << r.errors[0];
}

TEST_F(PackFixture, TokenBoundUsesTheCounter) {
  const TokenCounter words = [](std::string_view s) { return size_t(std::count(s.begin(), s.end(), ' ') + 1); };
  PackReport r = check_pack(write(pack), allow, PackLimits{}, &words);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r.briefing_tokens.has_value());
  pack["briefing"]["max_tokens"] = 5;
  r = check_pack(write(pack), allow, PackLimits{}, &words);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.errors[0].rfind("briefing-too-many-tokens:", 0), 0u) << r.errors[0];
}

TEST_F(PackFixture, UnknownFieldAndImplementationAreRefused) {
  json p = pack;
  p["briefing"]["system_override"] = true;
  PackReport r = check_pack(write(p), allow, PackLimits{}, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.errors[0].find("unknown field \"system_override\""), std::string::npos) << r.errors[0];
  p = pack;
  p["tools"][0] = json{{"id", "sql.query"}, {"code", "print(1)"}};
  EXPECT_FALSE(check_pack(write(p), allow, PackLimits{}, nullptr).ok());
}

TEST(PackInject, BriefingPrecedesPrompt) {
  EXPECT_EQ(inject_briefing("B", "P"), "B\n\nP");
}

}  // namespace
}  // namespace ember::contract

namespace ember::contract {
namespace {

TEST(PackCli, CountsBriefingTokensWithTheModelTokenizer) {
  const std::string ember = test::ember_binary();
  const std::string pack = kExamples + "/domcap1.valid.analytics-hotshot.json";
  const std::string allow = kExamples + "/tool-allowlist.valid.host.json";
  const std::string model = test::shared_path("models/stories260K.gguf");
  std::string out;
  ASSERT_EQ(test::run_command(ember + " pack validate " + pack + " --allow " + allow + " --model " + model + " --json", &out), 0) << out;
  const json j = json::parse(out.substr(out.find('{')));
  ASSERT_TRUE(j["briefing_tokens"].is_number_integer()) << out;
  const int tokens = j["briefing_tokens"].get<int>();
  EXPECT_GT(tokens, 40);
  EXPECT_LT(tokens, int(j["briefing_chars"].get<size_t>()));
  ASSERT_EQ(test::run_command(ember + " pack validate " + pack + " --allow " + allow + " --model " + model + " --max-tokens 10", &out), 1) << out;
  EXPECT_NE(out.find("briefing-too-many-tokens"), std::string::npos) << out;
  ASSERT_EQ(test::run_command(ember + " pack validate " + kExamples + "/domcap1.invalid.unknown-field.json --allow " + allow, &out), 1) << out;
  EXPECT_NE(out.find("unknown field \"credentials\""), std::string::npos) << out;
}

}  // namespace
}  // namespace ember::contract

namespace ember::contract {
namespace {

TEST(PackCli, RunInjectsOnlyAValidatedBriefing) {
  const std::string ember = test::ember_binary();
  const std::string pack = kExamples + "/domcap1.valid.analytics-hotshot.json";
  const std::string allow = kExamples + "/tool-allowlist.valid.host.json";
  const std::string model = test::shared_path("models/stories260K.gguf");
  // The briefing makes a 196-token prompt: past stories260K's context_length 128 (its GGUF's;
  // trained on 512), which `run` refuses without the flag (issue 12, defect 4).
  const std::string run = ember + " run --model " + model + " --prompt 'Once upon a time' -n 2 --threads 1 --allow-past-context";
  std::string out;
  ASSERT_EQ(test::run_command(run + " --pack " + pack + " --allow " + allow, &out), 0) << out;
  EXPECT_NE(out.find("capability pack analytics-hotshot: briefing 320 characters"), std::string::npos) << out;
  EXPECT_NE(out.find("tools: sql.query, table.describe"), std::string::npos) << out;
  // The briefing really is in the prompt: more prompt tokens than without it.
  std::string plain;
  ASSERT_EQ(test::run_command(run, &plain), 0) << plain;
  auto prompt_tokens = [](const std::string& s) {
    const size_t at = s.find(" prompt tokens");
    size_t b = at;
    while (b > 0 && std::isdigit(static_cast<unsigned char>(s[b - 1]))) --b;
    return at == std::string::npos ? -1 : std::stoi(s.substr(b, at - b));
  };
  EXPECT_GT(prompt_tokens(out), prompt_tokens(plain) + 40) << out << plain;
  // Refused packs never reach the model.
  const std::string dir = test::temp_dir("runpack");
  json bad = parse_json_strict(read_file(pack), "pack");
  bad["tools"].push_back("shell.exec");
  write_file_atomic(dir + "/bad.json", bad.dump(), false);
  EXPECT_EQ(test::run_command(run + " --pack " + dir + "/bad.json --allow " + allow, &out), 2) << out;
  EXPECT_NE(out.find("tool-not-allowed"), std::string::npos) << out;
  EXPECT_EQ(test::run_command(run + " --pack " + pack, &out), 2) << out;  // no --allow
}

}  // namespace
}  // namespace ember::contract
