// Chat templates against Hugging Face's own renderings (../shared/tokenizer/*/chat-vectors.jsonl,
// made with @huggingface/jinja), through the library and through `ember template render` and
// `ember tokenize --messages`; recognition by exact text; what is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf/writer.h"
#include "support/cli_run.h"
#include "support/test_support.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "util/atomic_file.h"

namespace ember::tmpl {
namespace {

using test::q;
using test::run_ember;

struct Vector {
  std::string id;
  bool add_generation_prompt;
  nlohmann::json messages;
  std::string text;
};

std::vector<Vector> read_vectors(const std::string& family) {
  std::ifstream in(test::shared_path("tokenizer/" + family + "/chat-vectors.jsonl"));
  std::vector<Vector> out;
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    out.push_back({j.at("id"), j.at("add_generation_prompt"), j.at("messages"), j.at("text")});
  }
  return out;
}

std::string config_path(const std::string& family) {
  return test::shared_path("tokenizer/" + family + "/tokenizer_config.json");
}

std::string data_path(const std::string& name) { return std::string(EMBER_SOURCE_DIR) + "/tests/template/data/" + name; }

const char* kFamilies[] = {"qwen3", "llama3"};

TEST(ChatTemplate, LibraryReproducesEveryChatVector) {
  for (const char* family : kFamilies) {
    const ChatTemplate t = from_tokenizer_config(config_path(family));
    const auto vectors = read_vectors(family);
    ASSERT_EQ(vectors.size(), 14u) << family;  // seven conversations, without and with the prompt
    for (const Vector& v : vectors) {
      RenderOptions o;
      o.add_generation_prompt = v.add_generation_prompt;
      EXPECT_EQ(render(t, parse_messages(v.messages, "vector"), o), v.text)
          << family << " " << v.id << " add_generation_prompt=" << v.add_generation_prompt;
    }
  }
}

TEST(ChatTemplate, RecognisesTheSharedConfigs) {
  const ChatTemplate q3 = from_tokenizer_config(config_path("qwen3"));
  EXPECT_EQ(q3.kind, TemplateKind::qwen3);
  EXPECT_EQ(q3.bos_token, "");
  EXPECT_EQ(q3.eos_token, "<|im_end|>");
  EXPECT_FALSE(q3.writes_bos());
  const ChatTemplate l3 = from_tokenizer_config(config_path("llama3"));
  EXPECT_EQ(l3.kind, TemplateKind::llama3);
  EXPECT_EQ(l3.bos_token, "<|begin_of_text|>");
  EXPECT_TRUE(l3.writes_bos());
}

// Every string of every chat-vectors.jsonl, byte for byte, from the command (stdout only: the
// command writes nothing to stderr on success, and adds no newline).
TEST(TemplateCli, RenderReproducesEveryChatVector) {
  const std::string dir = test::temp_dir("template-render");
  size_t n = 0;
  for (const char* family : kFamilies) {
    for (const Vector& v : read_vectors(family)) {
      const std::string conv = dir + "/" + family + "-" + v.id + ".json";
      write_file_atomic(conv, v.messages.dump(), true);
      const auto r = run_ember("template render --tokenizer-config " + q(config_path(family)) + " --messages " +
                               q(conv) + (v.add_generation_prompt ? " --add-generation-prompt" : ""));
      ASSERT_EQ(r.rc, 0) << r.out;
      EXPECT_EQ(r.out, v.text) << family << " " << v.id;
      ++n;
    }
  }
  EXPECT_EQ(n, 28u);
}

// The ids of every rendered vector: the Llama template's own <|begin_of_text|> is the only BOS
// (encoding adds none), Qwen's text has none, and the control tokens are single ids.
TEST(ChatTemplate, RenderedVectorsTokenizeWithOneBosAndControlIds) {
  for (const char* family : kFamilies) {
    const bool llama = std::string(family) == "llama3";
    const auto tokenizer =
        tok::Tokenizer::from_json_file(test::shared_path(std::string("tokenizer/") + family + "/tokenizer.json"));
    const ChatTemplate t = from_tokenizer_config(config_path(family));
    for (const Vector& v : read_vectors(family)) {
      RenderOptions o;
      o.add_generation_prompt = v.add_generation_prompt;
      const auto ids = tokenizer->encode(render(t, parse_messages(v.messages, "vector"), o), /*add_bos=*/false);
      ASSERT_FALSE(ids.empty());
      EXPECT_EQ(ids, tokenizer->encode(v.text, false)) << v.id;
      EXPECT_EQ(std::count(ids.begin(), ids.end(), 128000), llama ? 1 : 0) << v.id;
      if (llama) {
        EXPECT_EQ(ids[0], 128000) << v.id;
      }
      const int32_t header = llama ? 128006 : 151644;  // <|start_header_id|>, <|im_start|>
      EXPECT_NE(std::find(ids.begin(), ids.end(), header), ids.end()) << v.id;
    }
  }
}

std::vector<int32_t> ids_of(const test::CliRun& r) {
  EXPECT_EQ(r.rc, 0) << r.out;
  return test::parse_report(r)["ids"].get<std::vector<int32_t>>();
}

// Through the command path run/export take (`tokenize --messages`, cli/chat_prompt.h): the ids
// equal `tokenize --no-bos` of the rendered string; one conversation with and without the
// generation prompt per family (each call loads a 9-11 MB tokenizer.json).
TEST(TemplateCli, SlowMessageIdsEqualTokenizeNoBosOfTheRenderedText) {
  const std::string dir = test::temp_dir("template-ids");
  for (const char* family : kFamilies) {
    const std::string tokenizer = test::shared_path(std::string("tokenizer/") + family + "/tokenizer.json");
    const auto vectors = read_vectors(family);
    for (size_t k : {size_t(2), size_t(3)}) {  // system-user, without and with the prompt
      const Vector& v = vectors.at(k);
      const std::string stem = dir + "/" + family + "-" + std::to_string(k);
      write_file_atomic(stem + ".json", v.messages.dump(), true);
      write_file_atomic(stem + ".txt", v.text, true);
      const auto from_messages =
          ids_of(run_ember("tokenize --json --tokenizer " + q(tokenizer) + " --tokenizer-config " +
                           q(config_path(family)) + " --messages " + q(stem + ".json") +
                           (v.add_generation_prompt ? " --add-generation-prompt" : "")));
      const auto from_text = ids_of(run_ember("tokenize --json --no-bos --tokenizer " + q(tokenizer) + " --file " +
                                              q(stem + ".txt")));
      EXPECT_EQ(from_messages, from_text) << family << " " << v.id;
      EXPECT_FALSE(from_messages.empty());
    }
  }
}

std::vector<Message> conv(std::initializer_list<std::pair<const char*, const char*>> m) {
  std::vector<Message> out;
  for (const auto& [role, content] : m) out.push_back({role, content, std::nullopt});
  return out;
}

TEST(ChatTemplate, Qwen25FromItsPublishedText) {
  const std::string text = read_file(data_path("qwen2.5.jinja"));
  const ChatTemplate t = from_text(text, "", "<|im_end|>", "qwen2.5.jinja");
  EXPECT_EQ(t.kind, TemplateKind::qwen25);
  EXPECT_EQ(t.sha256, "cd8e9439f0570856fd70470bf8889ebd8b5d1107207f67a5efb46e342330527f");
  RenderOptions g;
  g.add_generation_prompt = true;
  // Hand-derived from the template: without a system message it writes its default one.
  EXPECT_EQ(render(t, conv({{"user", "Hello!"}}), g),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render(t, conv({{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", "Bye"}}), {}),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n");
  // Consecutive tool messages share one user turn.
  EXPECT_EQ(render(t, conv({{"user", "q"}, {"tool", "a"}, {"tool", "b"}}), {}),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nq<|im_end|>\n<|im_start|>user\n<tool_response>\na\n</tool_response>\n"
            "<tool_response>\nb\n</tool_response><|im_end|>\n");
  // The GGUF copy without the final newline is the same template.
  EXPECT_EQ(from_text(text.substr(0, text.size() - 1), "", "", "x").kind, TemplateKind::qwen25);
}

TEST(ChatTemplate, Llama32FromItsPublishedText) {
  const std::string text = read_file(data_path("llama-3.2.jinja"));
  const ChatTemplate t = from_text(text, "<|begin_of_text|>", "<|eot_id|>", "llama-3.2.jinja");
  EXPECT_EQ(t.kind, TemplateKind::llama32);
  RenderOptions g;
  g.add_generation_prompt = true;
  g.date_string = "26 Jul 2024";
  // Hand-derived: the system turn always exists, with the knowledge cut-off and the date; the
  // system message is trimmed and moved into it.
  EXPECT_EQ(render(t, conv({{"system", "  Be brief.\n"}, {"user", "Hi\n"}}), g),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
            "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  RenderOptions plain;
  plain.date_string = "01 Dec 2026";
  EXPECT_EQ(render(t, conv({{"user", "Hi"}, {"tool", "{\"t\": 1}\n"}}), plain),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
            "Cutting Knowledge Date: December 2023\nToday Date: 01 Dec 2026\n\n<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>ipython<|end_header_id|>\n\n\"{\\\"t\\\": 1}\\n\"<|eot_id|>");
  // Without date_string: today's date, "%d %b %Y" (two-digit day, English month).
  const std::string today = render(t, conv({{"user", "Hi"}}), {});
  const size_t at = today.find("Today Date: ");
  ASSERT_NE(at, std::string::npos);
  EXPECT_EQ(today.substr(at + 12 + 11, 2), "\n\n") << today.substr(at, 30);
}

TEST(ChatTemplate, Qwen3ThinkingAsItsTemplateDoes) {
  const ChatTemplate t = from_tokenizer_config(config_path("qwen3"));
  RenderOptions no_think;
  no_think.add_generation_prompt = true;
  no_think.enable_thinking = false;
  EXPECT_EQ(render(t, conv({{"user", "Hi"}}), no_think),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  RenderOptions think = no_think;
  think.enable_thinking = true;
  EXPECT_EQ(render(t, conv({{"user", "Hi"}}), think), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  // Reasoning in the content of the last assistant turn is split out and kept; in a turn before
  // the last query it is dropped.
  EXPECT_EQ(render(t, conv({{"user", "a"}, {"assistant", "<think>\nr1\n</think>\n\nx"}, {"user", "b"},
                            {"assistant", "<think>r2</think>y"}}),
                   {}),
            "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\nx<|im_end|>\n<|im_start|>user\nb<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nr2\n</think>\n\ny<|im_end|>\n");
  std::vector<Message> rc = conv({{"user", "a"}, {"assistant", "x"}});
  rc[1].reasoning_content = "\nwhy\n";
  EXPECT_EQ(render(t, rc, {}),
            "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\n<think>\nwhy\n</think>\n\nx<|im_end|>\n");
}

TEST(ChatTemplate, UnknownTemplateIsAnErrorNamingItsHash) {
  std::string text = read_file(data_path("qwen2.5.jinja"));
  text[100] ^= 0x20;
  const std::string e = test::error_of([&] { from_text(text, "", "", "m.gguf"); });
  EXPECT_NE(e.find("m.gguf: chat template: expected one of the recognised templates"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown template (2507 bytes, sha256 "), std::string::npos) << e;
  // One trailing newline more or less is the same template; two more are not recognised.
  const std::string q3_text = nlohmann::json::parse(read_file(config_path("qwen3")))["chat_template"];
  EXPECT_EQ(from_text(q3_text + "\n", "", "", "x").kind, TemplateKind::qwen3);
  EXPECT_NE(test::error_of([&] { from_text(q3_text + "\n\n", "", "", "x"); }), "");
  EXPECT_NE(test::error_of([&] { from_text(" " + q3_text, "", "", "x"); }), "");
  // A Llama template needs the BOS text it writes.
  EXPECT_NE(test::error_of([&] { from_text(read_file(data_path("llama-3.2.jinja")), "", "", "x"); })
                .find("bos_token: expected the BOS text"),
            std::string::npos);
}

TEST(ChatTemplate, MessagesAreReadStrictly) {
  const auto err = [](const char* json) {
    return test::error_of([&] { parse_messages(nlohmann::json::parse(json), "c.json"); });
  };
  EXPECT_EQ(err(R"([{"role":"user","content":"x"}])"), "");
  EXPECT_NE(err(R"([])").find("c.json: messages: expected at least one message"), std::string::npos);
  EXPECT_NE(err(R"({"role":"user"})").find("expected an array of messages"), std::string::npos);
  EXPECT_NE(err(R"([{"role":"user","content":"x"},{"role":"assistant","content":"","tool_calls":[]}])")
                .find("messages[1].tool_calls"),
            std::string::npos);
  EXPECT_NE(err(R"([{"role":"user","content":[{"type":"text","text":"x"}]}])").find("messages[0].content"),
            std::string::npos);
  EXPECT_NE(err(R"([{"content":"x"}])").find("messages[0].role"), std::string::npos);
  EXPECT_NE(test::error_of([] { render(from_tokenizer_config(config_path("qwen3")), {}, {}); }), "");
}

TEST(ChatTemplate, TrimIsPythonStrip) {
  EXPECT_EQ(python_strip(" \t\n x y \r\n"), "x y");
  EXPECT_EQ(python_strip("\xe3\x80\x80x\xc2\xa0"), "x");          // U+3000, U+00A0
  EXPECT_EQ(python_strip("\x1c" "x\xc2\x85"), "x");                // U+001C, U+0085
  EXPECT_EQ(python_strip("\xef\xbb\xbfx"), "\xef\xbb\xbfx");       // U+FEFF is not a space
  EXPECT_EQ(python_strip("\xe2\x80\x8bx"), "\xe2\x80\x8bx");       // nor U+200B
  EXPECT_EQ(python_strip("   "), "");
  EXPECT_EQ(python_strip("\xd8\xa7"), "\xd8\xa7");
}

// The template and BOS text from GGUF metadata, through the library and `--model`.
TEST(TemplateCli, ReadsTheGgufChatTemplate) {
  const std::string dir = test::temp_dir("template-gguf");
  const nlohmann::json cfg = nlohmann::json::parse(read_file(config_path("llama3")));
  gguf::GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string("tokenizer.chat_template", cfg["chat_template"].get<std::string>());
  w.set_string_array("tokenizer.ggml.tokens", {"a", "<|begin_of_text|>", "<|end_of_text|>"});
  w.set("tokenizer.ggml.bos_token_id", gguf::Value::of_u32(1));
  w.set("tokenizer.ggml.eos_token_id", gguf::Value::of_u32(2));
  w.write_file(dir + "/m.gguf", true);
  const ChatTemplate t = from_gguf(gguf::GgufFile::open(dir + "/m.gguf"));
  EXPECT_EQ(t.kind, TemplateKind::llama3);
  EXPECT_EQ(t.bos_token, "<|begin_of_text|>");
  const Vector v = read_vectors("llama3").at(2);
  write_file_atomic(dir + "/c.json", nlohmann::json{{"messages", v.messages}}.dump(), true);
  const auto r = run_ember("template render --model " + q(dir + "/m.gguf") + " --messages " + q(dir + "/c.json"));
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.out, v.text);

  gguf::GgufWriter bare;
  bare.set_string("general.architecture", "llama");
  bare.write_file(dir + "/bare.gguf", true);
  const auto e = run_ember("template render --model " + q(dir + "/bare.gguf") + " --messages " + q(dir + "/c.json"));
  EXPECT_EQ(e.rc, 2);
  EXPECT_NE(e.out.find("tokenizer.chat_template: expected a chat template in the GGUF metadata, found none"),
            std::string::npos)
      << e.out;
  const auto none = run_ember("template render --messages " + q(dir + "/c.json"));
  EXPECT_EQ(none.rc, 2);
  EXPECT_NE(none.out.find("--model / --tokenizer-config"), std::string::npos) << none.out;
}

}  // namespace
}  // namespace ember::tmpl
