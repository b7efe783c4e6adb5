#pragma once
// Strict JSON input for everything ember reads from outside (KVC1 headers, receipts,
// capability packs, allowlists): one parse that refuses what nlohmann would let through
// silently. Rejected: syntax errors, invalid UTF-8, duplicate object keys (nlohmann keeps
// the last one), nesting deeper than max_depth, and trailing content.
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace ember {

// Throws Error("<where>: ...") naming the problem (and the duplicated key, if any).
nlohmann::json parse_json_strict(std::string_view text, std::string_view where,
                                 int max_depth = 64);

// The canonical text of a JSON value: keys sorted by code unit, no whitespace, UTF-8 not
// escaped. nlohmann's object is a std::map, so dump() already sorts; this names the contract.
inline std::string canonical_json(const nlohmann::json& j) { return j.dump(); }

// Number of Unicode code points in valid UTF-8 (what JSON Schema's minLength/maxLength and
// Python's len() count).
size_t utf8_length(std::string_view s);

}  // namespace ember
