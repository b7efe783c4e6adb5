// `ember pack eval` on stories260K with the fixture pack tests/eval/data/stories-probes.domcap1.json:
// the receipt validates against its schema (ember's validator and Python's jsonschema), two
// runs give the same bytes, its figures are those of the tokenizer and of `ember run --pack`,
// and the refusals (a tool outside the allowlist, no checkable probe, a regex that does not
// compile, an existing output without --force) come before anything is written.
#include <gtest/gtest.h>

#include <string>

#include "contract/json_schema.h"
#include "gguf/gguf_file.h"
#include "support/cli_run.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"
#include "util/atomic_file.h"
#include "util/json_strict.h"
#include "util/sha256.h"

namespace ember::eval {
namespace {

using nlohmann::json;
using test::q;
using test::run_ember;

const std::string kPack = std::string(EMBER_SOURCE_DIR) + "/tests/eval/data/stories-probes.domcap1.json";
const std::string kAllow = std::string(EMBER_SOURCE_DIR) + "/schemas/examples/tool-allowlist.valid.host.json";

std::string model() { return test::shared_path("models/stories260K.gguf"); }

std::string eval_cmd(const std::string& pack, const std::string& out, const std::string& extra = "") {
  return "pack eval " + q(pack) + " --model " + q(model()) + " -n 16 --output " + q(out) + " " + extra + " 2>&1";
}

// The fixture pack with `edit` applied, written to dir/name.
std::string edited_pack(const std::string& dir, const std::string& name, const std::function<void(json&)>& edit) {
  json p = parse_json_strict(read_file(kPack), kPack);
  edit(p);
  const std::string path = dir + "/" + name;
  write_file_atomic(path, p.dump(), false);
  return path;
}

TEST(PackEval, ReceiptValidatesAndTwoRunsAreByteIdentical) {
  const std::string dir = test::temp_dir("pack_eval");
  const std::string a = dir + "/a.json", b = dir + "/b.json";
  const auto r1 = run_ember(eval_cmd(kPack, a, "--threads 1"));
  ASSERT_EQ(r1.rc, 0) << r1.out;
  EXPECT_NE(r1.out.find("probe tool-only: no expect.check, not evaluated"), std::string::npos) << r1.out;
  const auto r2 = run_ember(eval_cmd(kPack, b, "--threads 2 --allow " + q(kAllow)));
  ASSERT_EQ(r2.rc, 0) << r2.out;
  const std::string text = read_file(a);
  EXPECT_EQ(text, read_file(b));  // deterministic, whatever the thread count

  const json rec = parse_json_strict(text, a);
  EXPECT_TRUE(contract::builtin_schema("pack-eval-receipt").validate(rec).empty());
  const auto v = run_ember("contract validate " + q(a));
  EXPECT_EQ(v.rc, 0) << v.out;
  std::string py;
  const int py_rc = test::run_command(
      "/usr/bin/python3 -c 'import json,sys,jsonschema; jsonschema.validate(json.load(open(sys.argv[1])), "
      "json.load(open(sys.argv[2])))' " + q(a) + " " + q(std::string(EMBER_SOURCE_DIR) + "/schemas/pack-eval-receipt.schema.json") + " 2>&1",
      &py);
  EXPECT_EQ(py_rc, 0) << py;

  // What ran.
  const auto tk = tok::Tokenizer::from_gguf(gguf::GgufFile::open(model()));
  EXPECT_EQ(rec["model"]["tokenizer_identity"], tk->identity());
  EXPECT_EQ(rec["model"]["name"], "stories260K.gguf");
  EXPECT_EQ(rec["pack"]["sha256"], sha256_file_hex(kPack));
  const json pack = parse_json_strict(read_file(kPack), kPack);
  EXPECT_EQ(rec["pack"]["probes_sha256"], sha256_hex(canonical_json(pack["probes"])));
  EXPECT_EQ(rec["decoding"]["max_tokens"], 16);
  EXPECT_EQ(rec["engine"]["numerics_contract"], "canonical-v1");

  // Per probe: the checked probes in pack order, the tool-only one left out; prompt tokens as
  // the tokenizer encodes them, with the briefing as `ember run --pack` injects it.
  const std::string briefing = pack["briefing"]["text"];
  ASSERT_EQ(rec["probes"].size(), 5u);
  size_t passed_without = 0, passed_with = 0, tokens_without = 0, tokens_with = 0;
  for (size_t i = 0; i < 5; ++i) {
    const json& p = rec["probes"][i];
    EXPECT_EQ(p["id"], pack["probes"][i]["id"]);
    EXPECT_EQ(p["check"]["kind"], pack["probes"][i]["expect"]["check"]["kind"]);
    const std::string prompt = p["prompt"];
    const std::string text_with = briefing + "\n\n" + prompt;
    EXPECT_EQ(p["without"]["prompt_tokens"], tk->encode(prompt, true).size());
    EXPECT_EQ(p["with"]["prompt_tokens"],
              tk->encode_plain_prefix(text_with, text_with.size() - prompt.size(), true).size());
    passed_without += p["without"]["pass"].get<bool>();
    passed_with += p["with"]["pass"].get<bool>();
    tokens_without += p["without"]["prompt_tokens"].get<size_t>() + p["without"]["generated_tokens"].get<size_t>();
    tokens_with += p["with"]["prompt_tokens"].get<size_t>() + p["with"]["generated_tokens"].get<size_t>();
  }
  // The outputs are the greedy continuations `ember run` prints.
  // stdout only (run_command adds 2>&1 outside the parentheses).
  const auto printed = [](const std::string& args) {
    std::string out;
    EXPECT_EQ(test::run_command("(" + test::ember_binary() + " " + args + " 2>/dev/null)", &out), 0) << args;
    return out;
  };
  EXPECT_EQ(printed("run --model " + q(model()) + " --prompt " + q(rec["probes"][0]["prompt"]) + " --pack " +
                    q(kPack) + " --allow " + q(kAllow) + " -n 16 --quiet"),
            rec["probes"][0]["with"]["output"].get<std::string>() + "\n");
  EXPECT_EQ(printed("run --model " + q(model()) + " --prompt " + q(rec["probes"][1]["prompt"]) + " -n 16 --quiet"),
            rec["probes"][1]["without"]["output"].get<std::string>() + "\n");

  // Totals add up, and the briefing's cost is its bytes and its plain-text tokens.
  const json& t = rec["totals"];
  EXPECT_EQ(t["n_probes"], 5);
  EXPECT_EQ(t["passed_without"], passed_without);
  EXPECT_EQ(t["passed_with"], passed_with);
  EXPECT_EQ(t["score_without"], double(passed_without) / 5);
  EXPECT_EQ(t["score_with"], double(passed_with) / 5);
  EXPECT_EQ(t["difference"], double(passed_with) / 5 - double(passed_without) / 5);
  EXPECT_EQ(t["briefing_bytes"], briefing.size());
  EXPECT_EQ(t["briefing_tokens"], tk->encode(briefing, false, false).size());
  EXPECT_EQ(t["tokens_without"], tokens_without);
  EXPECT_EQ(t["tokens_with"], tokens_with);
  // On this model the fixture's "mood" probe fails without the briefing and passes with it
  // (a measured fact about stories260K, not a capability): the difference is not always 0.
  EXPECT_FALSE(rec["probes"][3]["without"]["pass"].get<bool>());
  EXPECT_TRUE(rec["probes"][3]["with"]["pass"].get<bool>());
}

TEST(PackEval, RefusesAToolOutsideTheAllowlist) {
  const std::string dir = test::temp_dir("pack_eval_tools");
  const std::string pack = edited_pack(dir, "tools.json", [](json& p) { p["tools"] = {"sql.query", "shell.exec"}; });
  const std::string out = dir + "/r.json";
  const auto r = run_ember(eval_cmd(pack, out, "--allow " + q(kAllow)));
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("capability pack refused: tool-not-allowed: /tools/1: expected a tool of the host allowlist"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("found \"shell.exec\""), std::string::npos) << r.out;
  EXPECT_FALSE(path_exists(out));
  // Without --allow the allowlist is empty: even sql.query is refused.
  const auto none = run_ember(eval_cmd(pack, out));
  EXPECT_EQ(none.rc, 2) << none.out;
  EXPECT_NE(none.out.find("tool-not-allowed: /tools/0"), std::string::npos) << none.out;
  EXPECT_FALSE(path_exists(out));
  // With every tool allowed, the same pack runs.
  const std::string allow = dir + "/allow.json";
  write_file_atomic(allow, R"({"format":"ember.tool-allowlist.v1","tools":["sql.query","shell.exec"]})", false);
  const auto ok = run_ember(eval_cmd(edited_pack(dir, "one.json", [](json& p) {
                                       p["tools"] = {"sql.query", "shell.exec"};
                                       p["probes"] = json::array({p["probes"][0]});
                                     }),
                                     out, "--allow " + q(allow)));
  EXPECT_EQ(ok.rc, 0) << ok.out;
}

TEST(PackEval, RefusesWhatItCannotCheckBeforeRunning) {
  const std::string dir = test::temp_dir("pack_eval_refusals");
  const std::string out = dir + "/r.json";
  // No probe with a check.
  const auto none = run_ember(eval_cmd(edited_pack(dir, "none.json", [](json& p) {
                                         p["probes"] = json::array({p["probes"][5]});
                                       }),
                                       out));
  EXPECT_EQ(none.rc, 2) << none.out;
  EXPECT_NE(none.out.find("probes: expected at least one probe with expect.check"), std::string::npos) << none.out;
  // A regex that the schema lets through but PCRE2 does not compile, named by its probe.
  const auto bad = run_ember(eval_cmd(edited_pack(dir, "bad.json", [](json& p) {
                                        p["probes"][1]["expect"]["check"]["value"] = "(unclosed";
                                      }),
                                      out));
  EXPECT_EQ(bad.rc, 2) << bad.out;
  EXPECT_NE(bad.out.find("/probes/1 (dog-name): check.value: expected a PCRE2 pattern that compiles"), std::string::npos)
      << bad.out;
  // A check kind outside the schema's four.
  const auto code = run_ember(eval_cmd(edited_pack(dir, "code.json", [](json& p) {
                                         p["probes"][0]["expect"]["check"]["kind"] = "python";
                                       }),
                                       out));
  EXPECT_EQ(code.rc, 2) << code.out;
  EXPECT_NE(code.out.find("capability pack refused: schema: /probes/0/expect/check/kind"), std::string::npos)
      << code.out;
  // More positions than the model's context (128).
  const auto longer = run_ember("pack eval " + q(kPack) + " --model " + q(model()) + " -n 200 --output " + q(out) + " 2>&1");
  EXPECT_EQ(longer.rc, 2) << longer.out;
  EXPECT_NE(longer.out.find("probe once: positions: expected at most the engine's 128"), std::string::npos) << longer.out;
  EXPECT_FALSE(path_exists(out));
}

TEST(PackEval, AnExistingReceiptIsReplacedOnlyWithForce) {
  const std::string dir = test::temp_dir("pack_eval_force");
  const std::string pack = edited_pack(dir, "one.json", [](json& p) { p["probes"] = json::array({p["probes"][0]}); });
  const std::string out = dir + "/r.json";
  write_file_atomic(out, "keep\n", false);
  const auto r = run_ember(eval_cmd(pack, out));
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("--output: expected a path that does not exist yet (or --force)"), std::string::npos) << r.out;
  EXPECT_EQ(read_file(out), "keep\n");
  const auto f = run_ember(eval_cmd(pack, out, "--force"));
  ASSERT_EQ(f.rc, 0) << f.out;
  EXPECT_TRUE(contract::builtin_schema("pack-eval-receipt").validate(parse_json_strict(read_file(out), out)).empty());
  // The output may not be one of the inputs.
  const auto same = run_ember(eval_cmd(pack, pack, "--force"));
  EXPECT_EQ(same.rc, 2) << same.out;
  EXPECT_TRUE(parse_json_strict(read_file(pack), pack).is_object());
}

TEST(PackEval, WithoutOutputTheReceiptIsPrintedAsAsciiJsonOfTheSameValue) {
  const std::string dir = test::temp_dir("pack_eval_stdout");
  // A prompt with a right-to-left override and a C1 control: valid UTF-8 the schema allows.
  const std::string pack = edited_pack(dir, "bidi.json", [](json& p) {
    p["probes"] = json::array({p["probes"][0]});
    p["probes"][0]["prompt"] = "Once upon a time\u202e\u0085";
  });
  std::string printed;
  ASSERT_EQ(test::run_command("(" + test::ember_binary() + " pack eval " + q(pack) + " --model " + q(model()) +
                                  " -n 16 2>/dev/null)", &printed), 0) << printed;
  for (unsigned char c : printed) EXPECT_TRUE(c == '\n' || (c >= 0x20 && c < 0x7f)) << int(c);
  EXPECT_NE(printed.find("\\u202e\\u0085"), std::string::npos) << printed;
  const std::string out = dir + "/r.json";
  ASSERT_EQ(run_ember(eval_cmd(pack, out)).rc, 0);
  EXPECT_EQ(parse_json_strict(printed, "stdout"), parse_json_strict(read_file(out), out));
}

}  // namespace
}  // namespace ember::eval
