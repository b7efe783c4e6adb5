// `ember run` and `ember kv export` take conversations (--messages) and JSONL prompt files
// (--prompt-file P.jsonl --prompt-id ID) through one path (cli/prompt_input.h): the ids they
// run are those of the rendered text with no BOS added, and a JSONL text entry is --prompt.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "support/cli_run.h"
#include "support/test_support.h"
#include "util/atomic_file.h"

namespace ember {
namespace {

using test::q;
using test::run_ember;

struct Fixture {
  std::string dir, model, cfg, conv, jsonl;
};

const Fixture& fixture() {
  static const Fixture f = [] {
    Fixture x;
    x.dir = test::temp_dir("prompt-cli");
    x.model = test::shared_path("models/stories260K.gguf");  // no chat template of its own
    x.cfg = test::shared_path("tokenizer/qwen3/tokenizer_config.json");
    x.conv = x.dir + "/conv.json";
    write_file_atomic(x.conv, R"([{"role":"user","content":"Once upon a time"}])", true);
    x.jsonl = x.dir + "/p.jsonl";
    write_file_atomic(x.jsonl,
                      "{\"id\":\"t\",\"text\":\"Once upon a time\"}\n"
                      "{\"id\":\"c\",\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a time\"}]}\n",
                      true);
    return x;
  }();
  return f;
}

std::string out_of(const std::string& args) {
  const auto r = run_ember(args);
  EXPECT_EQ(r.rc, 0) << args << "\n" << r.out;
  return r.out;
}

// The ids `tokenize --no-bos` gives for the rendered conversation, as a --prompt-ids list.
std::string rendered_ids(const Fixture& f) {
  write_file_atomic(f.dir + "/rendered.txt",
                    out_of("template render --tokenizer-config " + q(f.cfg) + " --messages " + q(f.conv) +
                           " --add-generation-prompt"),
                    true);
  const auto j = test::parse_report(
      run_ember("tokenize --json --no-bos --model " + q(f.model) + " --file " + q(f.dir + "/rendered.txt")));
  std::string list;
  for (const auto& id : j["ids"]) list += (list.empty() ? "" : ",") + std::to_string(id.get<int>());
  return list;
}

TEST(PromptCli, RunTakesMessagesAndJsonlEntries) {
  const Fixture& f = fixture();
  const std::string run = "run --quiet -n 6 --model " + q(f.model);
  const std::string chat = " --tokenizer-config " + q(f.cfg) + " --add-generation-prompt";
  const std::string by_ids = out_of(run + " --prompt-ids " + rendered_ids(f));
  EXPECT_EQ(out_of(run + " --messages " + q(f.conv) + chat), by_ids);
  EXPECT_EQ(out_of(run + " --prompt-file " + q(f.jsonl) + " --prompt-id c" + chat), by_ids);
  EXPECT_EQ(out_of(run + " --prompt-file " + q(f.jsonl) + " --prompt-id t"),
            out_of(run + " --prompt 'Once upon a time'"));
}

TEST(PromptCli, KvExportTakesMessages) {
  const Fixture& f = fixture();
  const std::string exp = "kv export --model " + q(f.model);
  out_of(exp + " --messages " + q(f.conv) + " --tokenizer-config " + q(f.cfg) + " --add-generation-prompt -o " +
         q(f.dir + "/snap-m"));
  out_of(exp + " --prompt-ids " + rendered_ids(f) + " -o " + q(f.dir + "/snap-i"));
  const auto tokens = [](const std::string& dir) {
    return nlohmann::json::parse(read_file(dir + "/manifest.json"))["prefix"]["tokens"];
  };
  EXPECT_EQ(tokens(f.dir + "/snap-m"), tokens(f.dir + "/snap-i"));
  EXPECT_GT(tokens(f.dir + "/snap-m").size(), 5u);
}

TEST(PromptCli, RefusalsAreNamed) {
  const Fixture& f = fixture();
  const std::string run = "run --quiet -n 1 --model " + q(f.model);
  auto r = run_ember(run + " --messages " + q(f.conv));  // the GGUF has no template, none given
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.out.find("tokenizer.chat_template: expected a chat template in the GGUF metadata, found none"),
            std::string::npos)
      << r.out;
  r = run_ember(run + " --prompt-file " + q(f.jsonl));
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.out.find(f.jsonl + ": --prompt-id: expected an entry id (the file holds 2 entries)"), std::string::npos)
      << r.out;
  write_file_atomic(f.dir + "/plain.txt", "Once", true);
  r = run_ember(run + " --prompt-file " + q(f.dir + "/plain.txt") + " --prompt-id t");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.out.find("--prompt-id: --prompt-file: expected a JSONL prompt file"), std::string::npos) << r.out;
  r = run_ember(run + " --messages " + q(f.conv) + " --prompt-ids 1,2");
  EXPECT_NE(r.rc, 0);
}

}  // namespace
}  // namespace ember
