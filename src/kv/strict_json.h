#pragma once
// kv's view of the strict JSON tools in util/: the parser with the depth limit of ember's own
// manifests (16), the field reader (util/json_fields.h) and the pretty printer
// (util/json_strict.h) the snapshot manifest is written with.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "util/json_fields.h"
#include "util/json_strict.h"

namespace ember::kv {

using ordered_json = nlohmann::ordered_json;
using ember::json_type_name;
using ember::pretty_json;
using ember::StrictObject;

// ember::parse_json_strict (util/json_strict.h) with the depth limit of ember's own
// manifests and receipts (16).
inline nlohmann::json parse_json_strict(const std::string& text, const std::string& where,
                                        int max_depth = 16, size_t max_values = SIZE_MAX) {
  return ember::parse_json_strict(text, where, max_depth, max_values);
}

}  // namespace ember::kv
