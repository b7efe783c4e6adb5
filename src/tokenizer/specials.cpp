#include "tokenizer/specials.h"

#include <algorithm>

namespace ember::tok {

void SpecialMatcher::add(std::string content, int32_t id, bool control) {
  if (content.empty()) return;  // an empty token can never be matched
  entries_.push_back({std::move(content), id, control});
}

void SpecialMatcher::finish() {
  for (auto& v : by_first_) v.clear();
  for (uint32_t i = 0; i < entries_.size(); ++i)
    by_first_[static_cast<uint8_t>(entries_[i].content[0])].push_back(i);
  for (auto& v : by_first_) {
    std::stable_sort(v.begin(), v.end(), [&](uint32_t a, uint32_t b) {
      return entries_[a].content.size() > entries_[b].content.size();
    });
  }
}

std::vector<Fragment> SpecialMatcher::split(std::string_view text, size_t special_from) const {
  std::vector<Fragment> out;
  size_t start = 0;  // start of the pending raw fragment
  size_t i = 0;
  while (i < text.size()) {
    const Entry* hit = nullptr;
    for (uint32_t e : by_first_[static_cast<uint8_t>(text[i])]) {
      const Entry& c = entries_[e];
      if (c.control && i < special_from) continue;
      if (text.compare(i, c.content.size(), c.content) == 0 && text.size() - i >= c.content.size()) {
        hit = &c;
        break;
      }
    }
    if (!hit) {
      ++i;
      continue;
    }
    if (i > start) out.push_back({text.substr(start, i - start), -1});
    out.push_back({{}, hit->id});
    i += hit->content.size();
    start = i;
  }
  if (start < text.size()) out.push_back({text.substr(start), -1});
  return out;
}

}  // namespace ember::tok
