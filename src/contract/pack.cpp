#include "contract/pack.h"

#include "contract/json_schema.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json_strict.h"
#include "util/sha256.h"

namespace ember::contract {

using nlohmann::json;

ToolAllowlist ToolAllowlist::load(const std::string& path) {
  const json doc = parse_json_strict(read_input(path, 16u << 20), path);
  const auto errors = builtin_schema("tool-allowlist").validate(doc);
  if (!errors.empty()) fail(path, "not a valid tool allowlist (ember.tool-allowlist.v1): " + errors.front());
  ToolAllowlist a;
  a.path = path;
  for (const auto& t : doc["tools"]) a.tools.insert(t.get<std::string>());
  return a;
}

PackReport check_pack(const std::string& pack_path, const ToolAllowlist& allow,
                      const PackLimits& limits, const TokenCounter* count_tokens) {
  return check_pack_text(read_input(pack_path, 16u << 20), pack_path, allow, limits, count_tokens);
}

PackReport check_pack_text(const std::string& text, const std::string& pack_path,
                           const ToolAllowlist& allow, const PackLimits& limits,
                           const TokenCounter* count_tokens) {
  PackReport r;
  r.path = pack_path;
  r.sha256 = sha256_hex(text);
  r.pack = parse_json_strict(text, pack_path);
  for (const auto& e : builtin_schema("domcap1").validate(r.pack)) r.errors.push_back("schema: " + e);
  if (!r.errors.empty()) return r;  // the fields below are only meaningful in a valid pack

  const json& tools = r.pack["tools"];
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string id = tools[i].get<std::string>();
    r.tools.push_back(id);
    if (!allow.tools.count(id))
      r.errors.push_back("tool-not-allowed: /tools/" + std::to_string(i) + ": expected a tool of the host allowlist " +
                         allow.path + ", found \"" + id + "\"");
  }
  const json& b = r.pack["briefing"];
  r.briefing = b["text"].get<std::string>();
  r.briefing_chars = utf8_length(r.briefing);
  const size_t pack_chars = b["max_chars"].get<size_t>();
  const size_t max_chars = std::min(pack_chars, limits.max_chars);
  if (r.briefing_chars > max_chars)
    r.errors.push_back("briefing-too-long: /briefing/text: expected at most " + std::to_string(max_chars) +
                       " characters (pack max_chars " + std::to_string(pack_chars) + ", host limit " +
                       std::to_string(limits.max_chars) + "), found " + std::to_string(r.briefing_chars));
  if (count_tokens) {
    r.briefing_tokens = (*count_tokens)(r.briefing);
    size_t max_tokens = limits.max_tokens;
    if (b.contains("max_tokens")) max_tokens = std::min(max_tokens, b["max_tokens"].get<size_t>());
    if (*r.briefing_tokens > max_tokens)
      r.errors.push_back("briefing-too-many-tokens: /briefing/text: expected at most " + std::to_string(max_tokens) +
                         " tokens, found " + std::to_string(*r.briefing_tokens));
  }
  return r;
}

PackReport load_validated_pack(const std::string& pack_path, const ToolAllowlist& allow,
                               const PackLimits& limits, const TokenCounter* count_tokens) {
  PackReport r = check_pack(pack_path, allow, limits, count_tokens);
  if (!r.ok()) fail(pack_path, "capability pack refused: " + r.errors.front());
  return r;
}

std::string inject_briefing(std::string_view briefing, std::string_view prompt) {
  std::string s(briefing);
  s.append("\n\n").append(prompt);
  return s;
}

}  // namespace ember::contract
