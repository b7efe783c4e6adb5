#include "template/prompt_file.h"

#include <set>

#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json_fields.h"
#include "util/json_strict.h"

namespace ember::tmpl {
namespace {
constexpr size_t kMaxFileBytes = size_t(256) << 20;
constexpr size_t kMaxEntries = 1000000;
constexpr size_t kMaxTextBytes = size_t(64) << 20;
}  // namespace

bool is_prompt_jsonl(const std::string& path) {
  return path.size() > 6 && path.compare(path.size() - 6, 6, ".jsonl") == 0;
}

std::vector<PromptEntry> read_prompt_jsonl(const std::string& path) {
  const std::string text = read_input(path, kMaxFileBytes);
  if (text.empty()) fail_field(path, "entries", "at least one JSON line", "an empty file");
  std::vector<PromptEntry> out;
  std::set<std::string> ids;
  size_t begin = 0, line = 0;
  while (begin < text.size()) {
    ++line;
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string_view row(text.data() + begin, end - begin);
    begin = end + 1;
    const std::string where = path + ":" + std::to_string(line);
    if (row.empty() || row == "\r") fail_field(where, "line", "one JSON object", "an empty line");
    if (out.size() == kMaxEntries) fail_field(where, "entries", "at most 1000000", "more");
    const nlohmann::json j = parse_json_strict(row, where, 16);
    StrictObject o(j, "", where);
    PromptEntry e;
    e.line = line;
    e.where = where;
    e.id = o.string("id", 256);
    if (e.id.empty()) fail_field(where, "id", "a non-empty string", "\"\"");
    if (!ids.insert(e.id).second) fail_field(where, "id", "an id no earlier line has", "\"" + e.id + "\" again");
    const bool has_text = o.has("text"), has_messages = o.has("messages");
    if (has_text == has_messages)
      fail_field(where, "text / messages", "exactly one of them", has_text ? "both" : "neither");
    if (has_text) {
      e.text = o.string("text", kMaxTextBytes);
    } else {
      e.messages = parse_messages(o.array("messages"), where, "messages");
    }
    o.done();
    out.push_back(std::move(e));
  }
  return out;
}

const PromptEntry& select_prompt(const std::vector<PromptEntry>& entries, const std::string& id,
                                 const std::string& path, const std::string& flag) {
  if (id.empty()) {
    if (entries.size() == 1) return entries[0];
    fail_field(path, flag, "an entry id (the file holds " + std::to_string(entries.size()) + " entries)", "none");
  }
  for (const PromptEntry& e : entries)
    if (e.id == id) return e;
  std::string some;
  for (size_t i = 0; i < entries.size() && i < 5; ++i) some += (i ? ", " : "") + entries[i].id;
  if (entries.size() > 5) some += ", ...";
  fail_field(path, flag, "one of the ids " + some, "\"" + id + "\"");
}

}  // namespace ember::tmpl
