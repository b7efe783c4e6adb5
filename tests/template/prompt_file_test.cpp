// The JSONL prompt format (docs/formats/prompts-jsonl.md): what is read, and every refusal
// named by FILE:LINE and field.
#include <gtest/gtest.h>

#include <string>

#include "support/test_support.h"
#include "template/prompt_file.h"
#include "util/atomic_file.h"

namespace ember::tmpl {
namespace {

std::string write(const std::string& name, const std::string& text) {
  static const std::string dir = test::temp_dir("prompt-jsonl");
  const std::string path = dir + "/" + name;
  write_file_atomic(path, text, true);
  return path;
}

TEST(PromptJsonl, ReadsTextAndMessageEntries) {
  const std::string p = write("ok.jsonl",
                              "{\"id\":\"a\",\"text\":\"line one\\nline two\"}\n"
                              "{\"id\":\"b\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}");
  const auto e = read_prompt_jsonl(p);
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].id, "a");
  EXPECT_EQ(*e[0].text, "line one\nline two");
  EXPECT_FALSE(e[0].messages);
  EXPECT_EQ(e[1].messages->at(0).content, "Hi");
  EXPECT_EQ(e[1].where, p + ":2");
  EXPECT_EQ(&select_prompt(e, "b", p, "--prompt-id"), &e[1]);
  EXPECT_NE(test::error_of([&] { select_prompt(e, "", p, "--prompt-id"); }).find("the file holds 2 entries"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] { select_prompt(e, "zz", p, "--prompt-id"); }).find("expected one of the ids a, b"),
            std::string::npos);
  EXPECT_TRUE(is_prompt_jsonl(p));
  EXPECT_FALSE(is_prompt_jsonl("prompts.txt"));
}

TEST(PromptJsonl, RefusalsNameFileLineAndField) {
  struct Case {
    const char* text;
    const char* expect;  // after "FILE:"
  };
  const Case cases[] = {
      {"{\"id\":\"a\",\"text\":\"x\"}\n\n", "2: line: expected one JSON object, found an empty line"},
      {"{\"id\":\"a\",\"text\":\"x\",\"extra\":1}\n", "1: "},
      {"{\"id\":\"a\"}\n", "1: text / messages: expected exactly one of them, found neither"},
      {"{\"id\":\"a\",\"text\":\"x\",\"messages\":[]}\n", "1: text / messages: expected exactly one of them, found both"},
      {"{\"id\":\"\",\"text\":\"x\"}\n", "1: id: expected a non-empty string"},
      {"{\"id\":\"a\",\"text\":\"x\"}\n{\"id\":\"a\",\"text\":\"y\"}\n", "2: id: expected an id no earlier line has"},
      {"{\"id\":7,\"text\":\"x\"}\n", "1: id"},
      {"{\"id\":\"a\",\"text\":\"x\"", "1: "},
      {"{\"id\":\"a\",\"id\":\"b\",\"text\":\"x\"}", "1: "},
      {"{\"id\":\"a\",\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"tool_calls\":[]}]}",
       "1: messages[0].tool_calls"},
      {"[1]\n", "1: "},
  };
  int n = 0;
  for (const Case& c : cases) {
    const std::string p = write("bad" + std::to_string(n++) + ".jsonl", c.text);
    const std::string e = test::error_of([&] { read_prompt_jsonl(p); });
    EXPECT_EQ(e.rfind(p + ":" + c.expect, 0), 0u) << c.text << " -> " << e;
  }
  EXPECT_NE(test::error_of([&] { read_prompt_jsonl(write("empty.jsonl", "")); }).find("an empty file"),
            std::string::npos);
}

}  // namespace
}  // namespace ember::tmpl
