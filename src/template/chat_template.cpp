#include "template/chat_template.h"

#include <array>

#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json_fields.h"
#include "util/json_strict.h"
#include "util/sha256.h"

namespace ember::tmpl {
namespace {

constexpr size_t kMaxTemplateBytes = size_t(1) << 20;
constexpr size_t kMaxConfigBytes = size_t(64) << 20;
constexpr size_t kMaxMessagesBytes = size_t(64) << 20;
constexpr size_t kMaxMessages = 1 << 20;
constexpr size_t kMaxContentBytes = size_t(64) << 20;

struct Known {
  const char* sha256;  // of the exact text as published (recognise() also tries it +/- one "\n")
  TemplateKind kind;
};

// The texts these hashes name are in tests/template/data/ with their sources.
constexpr std::array<Known, 4> kKnown = {{
    // Qwen3 (tokenizer_config.json of the Qwen3 release; ../shared/tokenizer/qwen3).
    {"87a2728cb8dc9fe424d624542f6060ec05a1d285ebbec578bb078900e33396b5", TemplateKind::qwen3},
    // Meta Llama 3 (original release; ../shared/tokenizer/llama3).
    {"b48c47f6443892716176eb200bf4ef108f64e06ca26ed0fa8ebc0a4b3992fcb2", TemplateKind::llama3},
    // Llama-3.2-1B/3B-Instruct chat_template.jinja (3827 bytes).
    {"5816fce10444e03c2e9ee1ef8a4a1ea61ae7e69e438613f3b17b69d0426223a4", TemplateKind::llama32},
    // Qwen2.5 Instruct (all sizes, Coder included; 2507 bytes, ending in a newline; GGUF
    // copies seen without it).
    {"cd8e9439f0570856fd70470bf8889ebd8b5d1107207f67a5efb46e342330527f", TemplateKind::qwen25},
}};

std::optional<TemplateKind> lookup(const std::string& hex) {
  for (const Known& k : kKnown)
    if (hex == k.sha256) return k.kind;
  return std::nullopt;
}

const std::string& token_text(const gguf::GgufFile& file, const std::vector<std::string>& tokens,
                              std::string_view key) {
  static const std::string none;
  const int64_t id = file.get_int_or(key, -1);
  if (id < 0) return none;
  if (size_t(id) >= tokens.size())
    fail_field(file.path(), key, "an id below tokenizer.ggml.tokens' " + std::to_string(tokens.size()),
               std::to_string(id));
  return tokens[size_t(id)];
}

// bos_token / eos_token of a tokenizer_config.json: a string, {"content": string, ...}, or
// null/absent ("").
std::string config_token(const nlohmann::json& cfg, const std::string& key, const std::string& where) {
  if (!cfg.contains(key) || cfg[key].is_null()) return "";
  const nlohmann::json& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  fail_field(where, key, "a string, an object with a string \"content\", or null", json_type_name(v));
}

}  // namespace

const char* kind_name(TemplateKind kind) {
  switch (kind) {
    case TemplateKind::llama3: return "llama-3";
    case TemplateKind::llama32: return "llama-3.2";
    case TemplateKind::qwen25: return "qwen2.5";
    case TemplateKind::qwen3: return "qwen3";
  }
  return "?";
}

bool ChatTemplate::writes_bos() const { return kind == TemplateKind::llama3 || kind == TemplateKind::llama32; }

TemplateKind recognise(std::string_view text, std::string_view where) {
  const std::string hex = sha256_hex(text);
  if (auto k = lookup(hex)) return *k;
  // The variant with one trailing newline more or less renders identically (see the header).
  if (!text.empty() && text.back() == '\n') {
    if (auto k = lookup(sha256_hex(text.substr(0, text.size() - 1)))) return *k;
  } else if (auto k = lookup(sha256_hex(std::string(text) + "\n"))) {
    return *k;
  }
  fail_field(where, "chat template",
             "one of the recognised templates (qwen3, qwen2.5, llama-3, llama-3.2; docs/templates.md)",
             "an unknown template (" + std::to_string(text.size()) + " bytes, sha256 " + hex + ")");
}

ChatTemplate from_text(std::string text, std::string bos_token, std::string eos_token, std::string_view where) {
  if (text.size() > kMaxTemplateBytes)
    fail_field(where, "chat template", "at most 1 MiB", std::to_string(text.size()) + " bytes");
  ChatTemplate t;
  t.kind = recognise(text, where);
  t.name = kind_name(t.kind);
  t.sha256 = sha256_hex(text);
  t.bos_token = std::move(bos_token);
  t.eos_token = std::move(eos_token);
  if (t.writes_bos() && t.bos_token.empty())
    fail_field(where, "bos_token", "the BOS text this " + t.name + " template writes", "none");
  return t;
}

ChatTemplate from_gguf(const gguf::GgufFile& file) {
  const gguf::Value* v = file.find("tokenizer.chat_template");
  if (!v) fail_field(file.path(), "tokenizer.chat_template", "a chat template in the GGUF metadata", "none");
  const std::string& text = v->as_string("tokenizer.chat_template");
  std::vector<std::string> tokens;
  if (file.has("tokenizer.ggml.tokens")) tokens = file.get_string_array("tokenizer.ggml.tokens");
  return from_text(text, token_text(file, tokens, "tokenizer.ggml.bos_token_id"),
                   token_text(file, tokens, "tokenizer.ggml.eos_token_id"), file.path());
}

ChatTemplate from_tokenizer_config(const std::string& path) {
  const nlohmann::json cfg = parse_json_strict(read_file(path, kMaxConfigBytes), path);
  if (!cfg.is_object()) fail_field(path, "top level", "an object", json_type_name(cfg));
  if (!cfg.contains("chat_template")) fail_field(path, "chat_template", "a chat template string", "none");
  const nlohmann::json& ct = cfg["chat_template"];
  if (!ct.is_string())
    fail_field(path, "chat_template", "a string (named template lists are not supported)", json_type_name(ct));
  return from_text(ct.get<std::string>(), config_token(cfg, "bos_token", path), config_token(cfg, "eos_token", path),
                   path);
}

std::vector<Message> parse_messages(const nlohmann::json& j, std::string_view where, std::string_view path) {
  const std::string w(where), p(path);
  if (!j.is_array()) fail_field(w, p, "an array of messages", json_type_name(j));
  if (j.empty()) fail_field(w, p, "at least one message", "an empty array");
  if (j.size() > kMaxMessages) fail_field(w, p, "at most 1048576 messages", std::to_string(j.size()));
  std::vector<Message> out;
  out.reserve(j.size());
  for (size_t i = 0; i < j.size(); ++i) {
    StrictObject o(j[i], p + "[" + std::to_string(i) + "]", w);
    Message m;
    m.role = o.string("role", 256);
    m.content = o.string("content", kMaxContentBytes);
    if (o.has("reasoning_content")) m.reasoning_content = o.string("reasoning_content", kMaxContentBytes);
    o.done();  // tool_calls, name, images...: refused by name
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<Message> read_messages_file(const std::string& path) {
  const nlohmann::json j = parse_json_strict(read_input(path, kMaxMessagesBytes), path, 16);
  if (j.is_object()) {
    StrictObject o(j, "", path);
    const nlohmann::json& arr = o.array("messages");
    o.done();
    return parse_messages(arr, path);
  }
  return parse_messages(j, path, "messages");
}

}  // namespace ember::tmpl
