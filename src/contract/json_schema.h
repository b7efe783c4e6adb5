#pragma once
// A JSON Schema (draft 2020-12) validator for the subset of keywords ember's own schemas use.
// The schemas under schemas/ are compiled into the binary, so `ember contract validate` and
// Python's jsonschema judge a document against the very same text (a CTest checks that they
// agree on every example). A schema that uses a keyword outside the subset is refused when it
// is compiled, never silently half-checked.
//
// Supported: $schema $id $defs $ref("#" or "#/$defs/NAME") $comment title description type
// enum const properties required additionalProperties minProperties maxProperties items
// minItems maxItems uniqueItems contains minLength maxLength pattern minimum maximum
// exclusiveMinimum exclusiveMaximum allOf anyOf oneOf not if then else.
// Not supported (refused): format, patternProperties, prefixItems, dependentRequired, ...
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace ember::contract {

class JsonSchema {
 public:
  // Throws Error naming `name` and the JSON pointer of an unsupported keyword or bad value.
  static JsonSchema compile(nlohmann::json schema, std::string name);

  // One line per violation, "<instance pointer>: <what>"; empty when the instance is valid.
  std::vector<std::string> validate(const nlohmann::json& instance) const;
  const std::string& name() const { return name_; }
  const nlohmann::json& document() const { return root_; }

 private:
  JsonSchema() = default;
  nlohmann::json root_;
  std::string name_;
};

// The schemas compiled into this binary, by stem ("bridge-receipt", "domcap1", ...).
std::vector<std::string> builtin_schema_names();
const JsonSchema& builtin_schema(std::string_view stem);  // Error naming an unknown stem
// The schema that pins properties.format.const to `format` ("DOMCAP1" -> domcap1). Error
// naming `where` and listing the known formats if none does.
const JsonSchema& schema_for_format(std::string_view format, std::string_view where);

}  // namespace ember::contract
