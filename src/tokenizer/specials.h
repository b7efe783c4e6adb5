#pragma once
// Matching of added tokens (control and user-defined) written literally in the text, before
// any normalization or split: leftmost-longest, as Hugging Face's added-vocabulary matcher.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ember::tok {

struct Fragment {
  std::string_view text;  // raw text when id < 0
  int32_t id = -1;        // a matched added token
};

class SpecialMatcher {
 public:
  // control: matched only when parse_special; user-defined: always matched.
  void add(std::string content, int32_t id, bool control);
  void finish();  // sorts candidates; call once after the last add()
  // Splits text into raw fragments and matched tokens, in order. Empty raw text is omitted.
  std::vector<Fragment> split(std::string_view text, bool parse_special) const {
    return split(text, parse_special ? 0 : text.size());
  }
  // Control tokens are matched only where they start at or after byte special_from (the
  // text before it is plain: a control token written there, or straddling special_from, is
  // text); user-defined tokens everywhere.
  std::vector<Fragment> split(std::string_view text, size_t special_from) const;
  bool empty() const { return entries_.empty(); }

 private:
  struct Entry {
    std::string content;
    int32_t id;
    bool control;
  };
  std::vector<Entry> entries_;
  std::array<std::vector<uint32_t>, 256> by_first_;  // entry indexes, longest first
};

}  // namespace ember::tok
