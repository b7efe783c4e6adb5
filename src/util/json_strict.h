#pragma once
// Strict JSON input for everything ember reads from outside (snapshot manifests, KVC1
// headers, receipts, capability packs, allowlists): one parse that refuses what nlohmann
// would let through silently. Rejected: syntax errors, invalid UTF-8, duplicate object keys
// (nlohmann keeps the last one; the message names the dotted path), nesting deeper than
// max_depth, more than max_values values, and trailing content. Linear time.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace ember {

// Throws Error("<where>: ...") naming the problem (and the duplicated key, if any).
// max_values counts objects, arrays and scalars, the top level included: a reader that knows
// its schema bounds the DOM (up to ~80 bytes per value), not only the text's size.
nlohmann::json parse_json_strict(std::string_view text, std::string_view where,
                                 int max_depth = 64, size_t max_values = SIZE_MAX);

// The canonical text of a JSON value: keys sorted by code unit, no whitespace, UTF-8 not
// escaped. nlohmann's object is a std::map, so dump() already sorts; this names the contract.
// Every hash or seal over JSON is over these bytes (KVC1 headers, the mapper hash).
inline std::string canonical_json(const nlohmann::json& j) { return j.dump(); }

// The human-readable text ember writes for documents whose key order is part of their
// format (snapshot manifests, gate receipts): objects in insertion order with 2-space indent,
// arrays of scalars on one line, strings escaped as nlohmann does (UTF-8 kept), a final
// newline. Deterministic (the same value gives the same bytes), but not canonical_json: a
// reader that accepts only these bytes compares pretty_json(parsed) with the file.
std::string pretty_json(const nlohmann::ordered_json& j);

// Number of Unicode code points in valid UTF-8 (what JSON Schema's minLength/maxLength and
// Python's len() count).
size_t utf8_length(std::string_view s);

}  // namespace ember
