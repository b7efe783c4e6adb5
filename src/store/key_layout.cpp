#include "store/key_layout.h"

#include <vector>

#include "store/backend.h"
#include "util/hex.h"

namespace ember::store {
namespace {

constexpr std::string_view kStates = "ember:v1:s:", kNamespaces = "ember:v1:n:";

// "{X}" -> X, else "".
std::string_view untag(std::string_view c) {
  return c.size() >= 2 && c.front() == '{' && c.back() == '}' ? c.substr(1, c.size() - 2) : std::string_view();
}

}  // namespace

std::string KeyLayout::state(const std::string& s) { return std::string(kStates) + "{" + s + "}"; }
std::string KeyLayout::entry(const std::string& s) { return state(s) + ":entry"; }
std::string KeyLayout::chunk(const std::string& s, const std::string& sha) { return state(s) + ":chunk:" + sha; }
std::string KeyLayout::pending(const std::string& s) { return state(s) + ":pending"; }
std::string KeyLayout::hits(const std::string& s) { return state(s) + ":hits"; }
std::string KeyLayout::signature(const std::string& s, const std::string& k) { return state(s) + ":sig:" + k; }
std::string KeyLayout::name(const std::string& ns, const std::string& n) {
  return std::string(kNamespaces) + "{" + ns + "}:name:" + n;
}
std::string KeyLayout::prefix(const std::string& ns, const std::string& h) {
  return std::string(kNamespaces) + "{" + ns + "}:prefix:" + h;
}

std::optional<ParsedKey> KeyLayout::parse(std::string_view key) {
  const std::vector<std::string_view> c = key_components(key);
  if (c.size() < 5 || c[0] != "ember" || c[1] != "v1") return std::nullopt;
  ParsedKey k;
  const std::string_view tag = untag(c[3]);
  k.tag = std::string(tag);
  if (c[2] == "s") {
    if (!is_hex(tag, 64)) return std::nullopt;
    if (c.size() == 5) {
      if (c[4] == "entry") k.kind = ParsedKey::Kind::entry;
      else if (c[4] == "pending") k.kind = ParsedKey::Kind::pending;
      else if (c[4] == "hits") k.kind = ParsedKey::Kind::hits;
      else return std::nullopt;
      return k;
    }
    if (c.size() != 6 || !is_hex(c[5], 64)) return std::nullopt;
    if (c[4] == "chunk") k.kind = ParsedKey::Kind::chunk;
    else if (c[4] == "sig") k.kind = ParsedKey::Kind::signature;
    else return std::nullopt;
    k.leaf = std::string(c[5]);
    return k;
  }
  if (c[2] == "n") {
    if (!is_hex(tag, 32) || c.size() != 6 || c[5].empty()) return std::nullopt;
    if (c[4] == "name") k.kind = ParsedKey::Kind::name;
    else if (c[4] == "prefix" && is_hex(c[5], 64)) k.kind = ParsedKey::Kind::prefix;
    else return std::nullopt;
    k.leaf = std::string(c[5]);
    return k;
  }
  return std::nullopt;
}

}  // namespace ember::store
