// `ember run` and `ember kv export` take conversations (--messages) and JSONL prompt files
// (--prompt-file P.jsonl --prompt-id ID) through one path (cli/prompt_input.h): the ids they
// run are those of the rendered text with no BOS added, and a JSONL text entry is --prompt.
#include <gtest/gtest.h>

#include <string>
#include <vector>

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

namespace ember {
namespace {

// map collect reads the same prompts from a line file, a JSONL file of text entries and a file
// of id lists (the ids `tokenize` gives, BOS included): the frozen split, which is by prompt
// hash, is the same for all three.
TEST(PromptCli, MapCollectTakesJsonlAndPromptIds) {
  const std::string dir = test::temp_dir("collect-prompts");
  const std::string model = test::shared_path("models/stories260K.gguf");
  const std::vector<std::string> texts = {"Once upon a time", "The cat sat", "Lily wanted to play", "A big red ball"};
  std::string lines, jsonl, ids;
  for (size_t i = 0; i < texts.size(); ++i) {
    lines += texts[i] + "\n";
    jsonl += nlohmann::json{{"id", "p" + std::to_string(i)}, {"text", texts[i]}}.dump() + "\n";
    const auto j = test::parse_report(run_ember("tokenize --json --model " + q(model) + " --prompt " + q(texts[i])));
    std::string list;
    for (const auto& id : j["ids"]) list += (list.empty() ? "" : ",") + std::to_string(id.get<int>());
    ids += list + "\n";
  }
  write_file_atomic(dir + "/p.txt", lines, true);
  write_file_atomic(dir + "/p.jsonl", jsonl, true);
  write_file_atomic(dir + "/p.ids", ids, true);
  const std::string collect = "map collect --source " + q(model) + " --target " + q(model) + " --split 3:1 --seed 2 ";
  std::string split;
  int n = 0;
  for (const std::string& src : {"--prompts " + q(dir + "/p.txt"), "--prompts " + q(dir + "/p.jsonl"),
                                 "--prompt-ids " + q(dir + "/p.ids")}) {
    const std::string out = dir + "/c" + std::to_string(n++);
    const auto r = run_ember(collect + src + " --output " + q(out));
    ASSERT_EQ(r.rc, 0) << src << "\n" << r.out;
    const auto m = nlohmann::json::parse(read_file(out + "/manifest.json"));
    const std::string h = m["split"].dump();
    if (split.empty()) split = h;
    EXPECT_EQ(h, split) << src;
  }
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {

// map hybrid takes --prompt-ids (the same run as --prompt of the same ids) and records the
// stated relation in its mapped cache and receipt; writing an artifact without one is refused.
TEST(PromptCli, MapHybridTakesPromptIdsAndRecordsTheRelation) {
  const std::string dir = test::temp_dir("hybrid-ids");
  const std::string src = test::shared_path("models/stories260K.gguf");
  const std::string tgt = test::shared_path("models/stories260K-kjv-top.gguf");
  const std::string hybrid = "map hybrid -n 6 --source " + q(src) + " --target " + q(tgt);
  const auto j = test::parse_report(run_ember("tokenize --json --model " + q(src) + " --prompt 'And the LORD said'"));
  std::string list;
  for (const auto& id : j["ids"]) list += (list.empty() ? "" : ",") + std::to_string(id.get<int>());
  ASSERT_EQ(run_ember(hybrid + " --prompt 'And the LORD said' --json-out " + q(dir + "/a.json")).rc, 0);
  ASSERT_EQ(run_ember(hybrid + " --prompt-ids " + list + " --relation same-base --output " + q(dir + "/m") +
                      " --json-out " + q(dir + "/b.json"))
                .rc,
            0);
  const auto a = nlohmann::json::parse(read_file(dir + "/a.json")), b = nlohmann::json::parse(read_file(dir + "/b.json"));
  EXPECT_EQ(a["generated"], b["generated"]);
  EXPECT_EQ(nlohmann::json::parse(read_file(dir + "/m/manifest.json"))["mapping"]["relation"], "same-base");
  const auto receipt = nlohmann::json::parse(read_file(dir + "/m.receipt.json"));
  EXPECT_EQ(receipt["format"], "ember.bridge-receipt.v2");
  EXPECT_EQ(receipt["translator"]["relation"], "same-base");
  const auto r = run_ember(hybrid + " --prompt-ids " + list + " --output " + q(dir + "/m2"));
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.out.find("map hybrid: --relation: expected quantization-boundary, same-base or cross-model"),
            std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {

// study sweep reads its prompts as map collect does: a file of id lists gives the same run
// (provenance: identities, split, prompts) as the line file those ids came from.
TEST(PromptCli, StudySweepTakesPromptIds) {
  const std::string dir = test::temp_dir("sweep-ids");
  const std::string src = test::shared_path("models/stories260K.gguf");
  const std::string tgt = test::shared_path("models/stories260K-kjv-top.gguf");
  const std::vector<std::string> texts = {"Once upon a time", "The cat sat on", "Lily wanted to play", "And the LORD said",
                                          "A big red ball", "Tom and his dog", "In the beginning God", "She saw a bird"};
  std::string lines, ids;
  for (const std::string& t : texts) {
    lines += t + "\n";
    const auto j = test::parse_report(run_ember("tokenize --json --model " + q(src) + " --prompt " + q(t)));
    std::string list;
    for (const auto& id : j["ids"]) list += (list.empty() ? "" : ",") + std::to_string(id.get<int>());
    ids += list + "\n";
  }
  write_file_atomic(dir + "/p.txt", lines, true);
  write_file_atomic(dir + "/p.ids", ids, true);
  const std::string sweep = "study sweep --split 5:3 --greedy-steps 2 --repeats 1 --source " + q(src) + " --target " + q(tgt);
  ASSERT_EQ(run_ember(sweep + " --prompts " + q(dir + "/p.txt") + " --json-out " + q(dir + "/a.json")).rc, 0);
  ASSERT_EQ(run_ember(sweep + " --prompt-ids " + q(dir + "/p.ids") + " --json-out " + q(dir + "/b.json")).rc, 0);
  const auto a = nlohmann::json::parse(read_file(dir + "/a.json")), b = nlohmann::json::parse(read_file(dir + "/b.json"));
  EXPECT_EQ(a["provenance"], b["provenance"]);
  const auto none = run_ember(sweep);
  EXPECT_EQ(none.rc, 2);
  EXPECT_NE(none.out.find("study sweep: prompts: expected --prompts FILE or --prompt-ids FILE"), std::string::npos)
      << none.out;
}

}  // namespace
}  // namespace ember
