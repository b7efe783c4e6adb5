#pragma once
// DOMCAP1 capability packs (schemas/domcap1.schema.json): a bounded expert briefing, the
// identifiers of host tools it requests, a source policy and evaluation probes. A pack is
// data: it can only name tools the host already trusts (its allowlist,
// schemas/tool-allowlist.schema.json), never supply an implementation; the schema refuses any
// field it does not define. docs/contracts.md.
#include <cstddef>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace ember::contract {

struct ToolAllowlist {
  std::string path;
  std::set<std::string> tools;
  // Reads and schema-checks an allowlist file; Error naming the file and the violation.
  static ToolAllowlist load(const std::string& path);
};

// Host-side bounds, applied on top of the pack's own declared max_chars / max_tokens.
struct PackLimits {
  size_t max_chars = 4000;
  size_t max_tokens = 1024;
};

// Counts tokens of a text with some model's tokenizer (the CLI passes one built from
// --model/--tokenizer; the contract layer does not load models itself).
using TokenCounter = std::function<size_t(std::string_view)>;

struct PackReport {
  std::string path;
  nlohmann::json pack;
  std::string sha256;                   // hex SHA-256 of the very bytes parsed into `pack`
  std::string briefing;                 // the text to inject
  size_t briefing_chars = 0;            // Unicode code points
  std::optional<size_t> briefing_tokens;  // when a TokenCounter was given
  std::vector<std::string> tools;
  // Each violation on one line, each starting with a stable name: schema, tool-not-allowed,
  // briefing-too-long, briefing-too-many-tokens. Empty when the pack may be used.
  std::vector<std::string> errors;
  bool ok() const { return errors.empty(); }
};

// Checks a pack file: strict JSON, the DOMCAP1 schema (unknown fields refused), every tool
// against the allowlist, the briefing's characters against both the pack's max_chars and
// limits.max_chars, and, with a counter, its tokens against max_tokens and limits.max_tokens.
// Throws Error only when the file cannot be read or parsed; contract violations are
// reported in PackReport::errors.
PackReport check_pack(const std::string& pack_path, const ToolAllowlist& allow,
                      const PackLimits& limits, const TokenCounter* count_tokens);

// The same check over a pack's text already in memory (pack_path names it in errors; the fuzz
// target's entry point).
PackReport check_pack_text(const std::string& text, const std::string& pack_path,
                           const ToolAllowlist& allow, const PackLimits& limits,
                           const TokenCounter* count_tokens);

// The hook for `ember run --pack`: check_pack, then Error with the first violation unless ok.
PackReport load_validated_pack(const std::string& pack_path, const ToolAllowlist& allow,
                               const PackLimits& limits, const TokenCounter* count_tokens);

// The prompt `ember run --pack` evaluates: the briefing, a blank line, then the user prompt.
std::string inject_briefing(std::string_view briefing, std::string_view prompt);

}  // namespace ember::contract
