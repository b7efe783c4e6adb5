#pragma once
// Chat templates, applied exactly as Hugging Face's apply_chat_template(messages,
// add_generation_prompt=...) renders them, for the templates ember recognises. A template is
// recognised by the SHA-256 of its exact text (the GGUF's tokenizer.chat_template or a
// tokenizer_config.json's chat_template); each recognised text has a native renderer written
// from that template, branch for branch. There is no Jinja interpreter: an unknown template is
// an error naming its hash, never a guess. Which templates, how exact, what is refused:
// docs/templates.md.
//
// Design goals: byte-exact output for every input the template accepts without tools; errors
// (not silent divergence) for the inputs ember does not render (tools, tool calls, non-string
// content, an empty conversation). Non-goals: arbitrary Jinja, tool use.
//
// Thread-safety: everything here is a pure function of its arguments, except that a render of
// a Llama 3.2 template without RenderOptions::date_string reads the local date (as the
// template's strftime_now does).
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf/gguf_file.h"

namespace ember::tmpl {

// One message of a conversation. Fields beyond these are refused when read (see
// parse_messages), so a tool call or an image never silently disappears.
struct Message {
  std::string role;
  std::string content;
  std::optional<std::string> reasoning_content;  // Qwen3's template reads it; others ignore it
};

enum class TemplateKind {
  llama3,    // Meta Llama 3 (original release): header + trimmed content + <|eot_id|>
  llama32,   // Meta Llama 3.2 Instruct: system header with "Cutting Knowledge" and today's date
  qwen25,    // Qwen2.5 Instruct: ChatML with the default "You are Qwen" system message
  qwen3,     // Qwen3: ChatML with <think> handling and enable_thinking
};

// A recognised template, with the special-token strings it renders.
struct ChatTemplate {
  TemplateKind kind;
  std::string name;      // "qwen3", "llama-3.2", ... (docs/templates.md)
  std::string sha256;    // of the template text as read
  std::string bos_token; // what `bos_token` renders as ("" when the source has none)
  std::string eos_token;
  // True when the rendered text starts with BOS by itself (the Llama templates write
  // bos_token): the ids of a rendered prompt are then encode(text) without adding BOS.
  bool writes_bos() const;
};

struct RenderOptions {
  bool add_generation_prompt = false;
  // Qwen3's `enable_thinking`: unset = undefined in the template (the default); false adds
  // the empty think block after the generation prompt. Other templates ignore it, as HF does.
  std::optional<bool> enable_thinking;
  // Llama 3.2's `date_string`; unset = today's local date, "%d %b %Y" (what HF's strftime_now
  // gives), so set it for reproducible prompts.
  std::optional<std::string> date_string;
};

// The name of a recognised template text, or an Error "<where>: chat template: expected one of
// the recognised templates (...), found an unknown template (N bytes, sha256 H)". A text that
// differs from a recognised one only by one trailing newline is the same template (Jinja drops
// one trailing newline, and trim_blocks the newline after a block tag: the output is identical).
TemplateKind recognise(std::string_view text, std::string_view where);
const char* kind_name(TemplateKind kind);

// Template and special tokens from a GGUF: tokenizer.chat_template, and the texts of
// tokenizer.ggml.bos_token_id / eos_token_id in tokenizer.ggml.tokens (empty when absent).
ChatTemplate from_gguf(const gguf::GgufFile& file);
// Template and special tokens from a Hugging Face tokenizer_config.json: chat_template (a
// string; the list-of-named-templates form is refused), bos_token / eos_token (a string, an
// AddedToken object {"content": ...}, or null).
ChatTemplate from_tokenizer_config(const std::string& path);
ChatTemplate from_text(std::string text, std::string bos_token, std::string eos_token,
                       std::string_view where);

// A conversation from JSON: an array of objects {"role": string, "content": string} with an
// optional "reasoning_content" string; any other key, a non-string value, or an empty array is
// an Error naming `where` and the JSON path (messages[2].content).
std::vector<Message> parse_messages(const nlohmann::json& j, std::string_view where,
                                    std::string_view path = "messages");
// The same, from a file holding that array (or an object {"messages": [...]}).
std::vector<Message> read_messages_file(const std::string& path);

// The rendered prompt, byte for byte what the template renders.
std::string render(const ChatTemplate& t, const std::vector<Message>& messages,
                   const RenderOptions& options);

// Python's str.strip() (what Jinja's `trim` filter and str.strip do in transformers): removes
// leading and trailing characters for which str.isspace() is true. Exposed for tests.
std::string python_strip(std::string_view s);

}  // namespace ember::tmpl
