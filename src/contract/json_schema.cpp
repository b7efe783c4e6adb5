#include "contract/json_schema.h"

#include <cmath>
#include <map>
#include <regex>
#include <set>
#include <utility>

#include "util/error.h"
#include "util/json_strict.h"

namespace ember::contract {

// Generated from schemas/*.schema.json (cmake/embed_schemas.cmake).
const std::vector<std::pair<std::string_view, std::string_view>>& embedded_schemas();

namespace {

using nlohmann::json;

const std::set<std::string>& supported_keywords() {
  static const std::set<std::string> k = {
      "$schema", "$id", "$defs", "$ref", "$comment", "title", "description", "type", "enum",
      "const", "properties", "required", "additionalProperties", "minProperties",
      "maxProperties", "items", "minItems", "maxItems", "uniqueItems", "contains", "minLength",
      "maxLength", "pattern", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
      "allOf", "anyOf", "oneOf", "not", "if", "then", "else"};
  return k;
}

std::string show(const json& j) {
  std::string s = j.dump();
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

// --- compile-time check of the schema itself ---
struct Checker {
  const json& root;
  const std::string& name;

  [[noreturn]] void bad(const std::string& at, const std::string& what) const {
    fail(name, "schema " + (at.empty() ? std::string("/") : at) + ": " + what);
  }
  void nonneg_int(const json& v, const std::string& at) const {
    if (!v.is_number_unsigned()) bad(at, "expected a non-negative integer");
  }
  void schema(const json& s, const std::string& at) const {
    if (s.is_boolean()) return;
    if (!s.is_object()) bad(at, "a schema must be an object or a boolean");
    for (const auto& [key, v] : s.items()) {
      const std::string here = at + "/" + key;
      if (!supported_keywords().count(key)) bad(here, "keyword not supported by ember's validator");
      if (key == "properties" || key == "$defs") {
        if (!v.is_object()) bad(here, "expected an object");
        for (const auto& [k2, sub] : v.items()) schema(sub, here + "/" + k2);
      } else if (key == "additionalProperties" || key == "items" || key == "contains" ||
                 key == "not" || key == "if" || key == "then" || key == "else") {
        schema(v, here);
      } else if (key == "allOf" || key == "anyOf" || key == "oneOf") {
        if (!v.is_array() || v.empty()) bad(here, "expected a non-empty array of schemas");
        for (size_t i = 0; i < v.size(); ++i) schema(v[i], here + "/" + std::to_string(i));
      } else if (key == "required") {
        if (!v.is_array()) bad(here, "expected an array of strings");
        for (const auto& r : v)
          if (!r.is_string()) bad(here, "expected an array of strings");
      } else if (key == "type") {
        static const std::set<std::string> types = {"null", "boolean", "object", "array",
                                                    "number", "integer", "string"};
        const json list = v.is_array() ? v : json::array({v});
        for (const auto& t : list)
          if (!t.is_string() || !types.count(t.get<std::string>())) bad(here, "unknown type " + show(t));
      } else if (key == "enum") {
        if (!v.is_array() || v.empty()) bad(here, "expected a non-empty array");
      } else if (key == "pattern") {
        if (!v.is_string()) bad(here, "expected a string");
        try {
          std::regex re(v.get<std::string>(), std::regex::ECMAScript);
        } catch (const std::regex_error&) {
          bad(here, "pattern does not compile");
        }
      } else if (key == "minLength" || key == "maxLength" || key == "minItems" ||
                 key == "maxItems" || key == "minProperties" || key == "maxProperties") {
        nonneg_int(v, here);
      } else if (key == "minimum" || key == "maximum" || key == "exclusiveMinimum" ||
                 key == "exclusiveMaximum") {
        if (!v.is_number()) bad(here, "expected a number");
      } else if (key == "uniqueItems") {
        if (!v.is_boolean()) bad(here, "expected a boolean");
      } else if (key == "$ref") {
        if (!v.is_string()) bad(here, "expected a string");
        const std::string ref = v.get<std::string>();
        const std::string prefix = "#/$defs/";
        if (ref != "#" && !(ref.rfind(prefix, 0) == 0 && root.contains("$defs") &&
                            root["$defs"].contains(ref.substr(prefix.size()))))
          bad(here, "only \"#\" and \"#/$defs/NAME\" of an existing NAME are supported");
      }
    }
  }
};

bool is_integer(const json& v) {
  if (v.is_number_integer()) return true;
  if (!v.is_number_float()) return false;
  const double d = v.get<double>();
  return std::isfinite(d) && std::floor(d) == d;
}

bool has_type(const json& v, const std::string& t) {
  if (t == "null") return v.is_null();
  if (t == "boolean") return v.is_boolean();
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "string") return v.is_string();
  if (t == "number") return v.is_number();
  if (t == "integer") return is_integer(v);
  return false;
}

// JSON Schema equality: numbers by value (1 == 1.0), booleans never equal numbers.
bool json_equal(const json& a, const json& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_number_float() || b.is_number_float()) return a.get<double>() == b.get<double>();
    return a == b;
  }
  if (a.type() != b.type()) return false;
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!json_equal(a[i], b[i])) return false;
    return true;
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (const auto& [k, v] : a.items()) {
      auto it = b.find(k);
      if (it == b.end() || !json_equal(v, *it)) return false;
    }
    return true;
  }
  return a == b;
}

struct Validator {
  const json& root;
  int depth = 0;

  void run(const json& s, const json& v, const std::string& at, std::vector<std::string>& out) {
    if (s.is_boolean()) {
      if (!s.get<bool>()) out.push_back(where(at) + ": no value is allowed here");
      return;
    }
    if (++depth > 256) {  // a $ref cycle in a schema (ours have none); never recurse forever
      out.push_back(where(at) + ": schema recursion too deep");
      --depth;
      return;
    }
    if (auto it = s.find("$ref"); it != s.end()) {
      const std::string ref = it->get<std::string>();
      run(ref == "#" ? root : root["$defs"][ref.substr(8)], v, at, out);
    }
    if (auto it = s.find("type"); it != s.end()) {
      const json list = it->is_array() ? *it : json::array({*it});
      bool ok = false;
      for (const auto& t : list) ok = ok || has_type(v, t.get<std::string>());
      if (!ok) out.push_back(where(at) + ": expected type " + show(*it) + ", found " + show(v));
    }
    if (auto it = s.find("const"); it != s.end() && !json_equal(*it, v))
      out.push_back(where(at) + ": expected " + show(*it) + ", found " + show(v));
    if (auto it = s.find("enum"); it != s.end()) {
      bool ok = false;
      for (const auto& e : *it) ok = ok || json_equal(e, v);
      if (!ok) out.push_back(where(at) + ": expected one of " + show(*it) + ", found " + show(v));
    }
    if (v.is_object()) object(s, v, at, out);
    if (v.is_array()) array(s, v, at, out);
    if (v.is_string()) string(s, v.get_ref<const std::string&>(), at, out);
    if (v.is_number()) number(s, v.get<double>(), at, out);
    combinators(s, v, at, out);
    --depth;
  }

  bool valid(const json& s, const json& v) {
    std::vector<std::string> tmp;
    run(s, v, "", tmp);
    return tmp.empty();
  }

  static std::string where(const std::string& at) { return at.empty() ? "/" : at; }

  void object(const json& s, const json& v, const std::string& at, std::vector<std::string>& out) {
    if (auto it = s.find("required"); it != s.end())
      for (const auto& r : *it)
        if (!v.contains(r.get<std::string>()))
          out.push_back(where(at) + ": missing required field \"" + r.get<std::string>() + "\"");
    const json* props = s.contains("properties") ? &s["properties"] : nullptr;
    for (const auto& [k, val] : v.items()) {
      const std::string here = at + "/" + k;
      if (props && props->contains(k)) {
        run((*props)[k], val, here, out);
      } else if (auto ap = s.find("additionalProperties"); ap != s.end()) {
        if (ap->is_boolean() && !ap->get<bool>())
          out.push_back(where(at) + ": unknown field \"" + k + "\"");
        else
          run(*ap, val, here, out);
      }
    }
    if (auto it = s.find("minProperties"); it != s.end() && v.size() < it->get<size_t>())
      out.push_back(where(at) + ": expected at least " + it->dump() + " fields, found " + std::to_string(v.size()));
    if (auto it = s.find("maxProperties"); it != s.end() && v.size() > it->get<size_t>())
      out.push_back(where(at) + ": expected at most " + it->dump() + " fields, found " + std::to_string(v.size()));
  }

  void array(const json& s, const json& v, const std::string& at, std::vector<std::string>& out) {
    if (auto it = s.find("minItems"); it != s.end() && v.size() < it->get<size_t>())
      out.push_back(where(at) + ": expected at least " + it->dump() + " items, found " + std::to_string(v.size()));
    if (auto it = s.find("maxItems"); it != s.end() && v.size() > it->get<size_t>())
      out.push_back(where(at) + ": expected at most " + it->dump() + " items, found " + std::to_string(v.size()));
    if (auto it = s.find("items"); it != s.end())
      for (size_t i = 0; i < v.size(); ++i) run(*it, v[i], at + "/" + std::to_string(i), out);
    if (auto it = s.find("uniqueItems"); it != s.end() && it->get<bool>()) {
      for (size_t i = 0; i < v.size(); ++i)
        for (size_t j = i + 1; j < v.size(); ++j)
          if (json_equal(v[i], v[j])) {
            out.push_back(where(at) + ": expected unique items, found " + show(v[i]) + " twice");
            i = j = v.size();
          }
    }
    if (auto it = s.find("contains"); it != s.end()) {
      bool any = false;
      for (const auto& item : v) any = any || valid(*it, item);
      if (!any) out.push_back(where(at) + ": expected an item matching " + show(*it) + ", found none");
    }
  }

  void string(const json& s, const std::string& v, const std::string& at, std::vector<std::string>& out) {
    const size_t len = utf8_length(v);
    if (auto it = s.find("minLength"); it != s.end() && len < it->get<size_t>())
      out.push_back(where(at) + ": expected at least " + it->dump() + " characters, found " + std::to_string(len));
    if (auto it = s.find("maxLength"); it != s.end() && len > it->get<size_t>())
      out.push_back(where(at) + ": expected at most " + it->dump() + " characters, found " + std::to_string(len));
    if (auto it = s.find("pattern"); it != s.end()) {
      const std::regex re(it->get<std::string>(), std::regex::ECMAScript);
      if (!std::regex_search(v, re))
        out.push_back(where(at) + ": expected a string matching " + it->dump() + ", found " + show(json(v)));
    }
  }

  void number(const json& s, double v, const std::string& at, std::vector<std::string>& out) {
    auto check = [&](const char* key, bool ok, const char* rel) {
      if (!ok) out.push_back(where(at) + ": expected a number " + rel + " " + s[key].dump() + ", found " + show(json(v)));
    };
    if (s.contains("minimum")) check("minimum", v >= s["minimum"].get<double>(), ">=");
    if (s.contains("maximum")) check("maximum", v <= s["maximum"].get<double>(), "<=");
    if (s.contains("exclusiveMinimum")) check("exclusiveMinimum", v > s["exclusiveMinimum"].get<double>(), ">");
    if (s.contains("exclusiveMaximum")) check("exclusiveMaximum", v < s["exclusiveMaximum"].get<double>(), "<");
  }

  void combinators(const json& s, const json& v, const std::string& at, std::vector<std::string>& out) {
    if (auto it = s.find("allOf"); it != s.end())
      for (const auto& sub : *it) run(sub, v, at, out);
    if (auto it = s.find("anyOf"); it != s.end()) {
      bool any = false;
      for (const auto& sub : *it) any = any || valid(sub, v);
      if (!any) out.push_back(where(at) + ": matches none of the allowed alternatives, found " + show(v));
    }
    if (auto it = s.find("oneOf"); it != s.end()) {
      int n = 0;
      for (const auto& sub : *it) n += valid(sub, v) ? 1 : 0;
      if (n != 1) out.push_back(where(at) + ": expected exactly one matching alternative, found " + std::to_string(n));
    }
    if (auto it = s.find("not"); it != s.end() && valid(*it, v))
      out.push_back(where(at) + ": matches a schema it must not match");
    if (auto it = s.find("if"); it != s.end()) {
      if (valid(*it, v)) {
        if (auto t = s.find("then"); t != s.end()) run(*t, v, at, out);
      } else if (auto e = s.find("else"); e != s.end()) {
        run(*e, v, at, out);
      }
    }
  }
};

struct Registry {
  std::map<std::string, JsonSchema, std::less<>> by_stem;
};

const Registry& registry() {
  static const Registry r = [] {
    Registry reg;
    for (const auto& [stem, text] : embedded_schemas()) {
      const std::string name = "schemas/" + std::string(stem) + ".schema.json";
      reg.by_stem.emplace(std::string(stem),
                          JsonSchema::compile(parse_json_strict(text, name), name));
    }
    return reg;
  }();
  return r;
}

}  // namespace

JsonSchema JsonSchema::compile(json schema, std::string name) {
  Checker{schema, name}.schema(schema, "");
  JsonSchema s;
  s.root_ = std::move(schema);
  s.name_ = std::move(name);
  return s;
}

std::vector<std::string> JsonSchema::validate(const json& instance) const {
  std::vector<std::string> out;
  Validator{root_}.run(root_, instance, "", out);
  return out;
}

std::vector<std::string> builtin_schema_names() {
  std::vector<std::string> names;
  for (const auto& [stem, s] : registry().by_stem) names.push_back(stem);
  return names;
}

const JsonSchema& builtin_schema(std::string_view stem) {
  const auto& m = registry().by_stem;
  auto it = m.find(stem);
  if (it == m.end()) fail_field("schemas", "schema name", "a built-in schema", std::string(stem));
  return it->second;
}

const JsonSchema& schema_for_format(std::string_view format, std::string_view where) {
  std::string known;
  for (const auto& [stem, s] : registry().by_stem) {
    const json& d = s.document();
    const json* c = nullptr;
    if (d.contains("properties") && d["properties"].contains("format") &&
        d["properties"]["format"].contains("const"))
      c = &d["properties"]["format"]["const"];
    if (!c || !c->is_string()) continue;
    if (c->get<std::string>() == format) return s;
    known += (known.empty() ? "" : "|") + c->get<std::string>();
  }
  fail_field(where, "format", known, "\"" + std::string(format) + "\"");
}

}  // namespace ember::contract
