#include "util/json_strict.h"

#include <set>
#include <vector>

#include "util/error.h"

namespace ember {

nlohmann::json parse_json_strict(std::string_view text, std::string_view where, int max_depth) {
  using nlohmann::json;
  std::vector<std::set<std::string>> keys;  // one set per open object
  std::string duplicate;
  int deepest = 0;
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) -> bool {
    if (depth > deepest) deepest = depth;
    if (depth > max_depth)
      fail_field(where, "nesting depth", "<= " + std::to_string(max_depth), std::to_string(depth));
    switch (event) {
      case json::parse_event_t::object_start: keys.emplace_back(); break;
      case json::parse_event_t::object_end: if (!keys.empty()) keys.pop_back(); break;
      case json::parse_event_t::key: {
        const std::string& k = parsed.get_ref<const std::string&>();
        if (!keys.empty() && !keys.back().insert(k).second)
          fail_field(where, "object key \"" + k + "\"", "each key once", "a duplicate");
        break;
      }
      default: break;
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/true,
                       /*ignore_comments=*/false);
  } catch (const json::exception& e) {
    fail(where, std::string("malformed JSON: ") + e.what());
  }
}

size_t utf8_length(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++n;  // count every byte that starts a code point
  return n;
}

}  // namespace ember
