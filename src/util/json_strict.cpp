#include "util/json_strict.h"

#include <algorithm>
#include <vector>

#include "util/error.h"

namespace ember {

using nlohmann::json;

namespace {

// Builds the DOM from nlohmann's SAX events, refusing a duplicated key (with its dotted path),
// nesting deeper than max_depth and more than max_values values. Not nlohmann's callback
// parser: that one scans the whole parent container after every closed object to drop
// discarded values, so `[{}, {}, ...]` took quadratic time (a 64 MiB manifest: days).
// Here every event costs O(log keys) at most. A value's depth is the number of containers
// around it (the top level is 0), as in nlohmann's callback.
class StrictDomBuilder {
 public:
  StrictDomBuilder(json& root, std::string_view where, int max_depth, size_t max_values)
      : root_(root), where_(where), max_depth_(size_t(std::max(max_depth, 0))), max_values_(max_values) {}

  bool null() { return scalar(nullptr); }
  bool boolean(bool v) { return scalar(v); }
  bool number_integer(json::number_integer_t v) { return scalar(v); }
  bool number_unsigned(json::number_unsigned_t v) { return scalar(v); }
  bool number_float(json::number_float_t v, const json::string_t&) { return scalar(v); }
  bool string(json::string_t& v) { return scalar(std::move(v)); }
  bool binary(json::binary_t&) { fail_field(where_, "JSON", "text JSON", "a binary value"); }

  bool start_object(size_t) {
    open(value(json::object()), true);
    return true;
  }
  bool key(json::string_t& k) {
    check_depth();  // a key is at the depth of its value
    Frame& f = stack_.back();
    if (f.node->contains(k)) fail_field(where_, path(k), "a key that appears once", "a duplicated key");
    f.slot = &(*f.node)[k];  // std::map: the address stays valid while siblings are added
    f.key = std::move(k);
    return true;
  }
  bool end_object() {
    stack_.pop_back();
    return true;
  }
  bool start_array(size_t) {
    open(value(json::array()), false);
    return true;
  }
  bool end_array() {
    stack_.pop_back();
    return true;
  }

  bool parse_error(size_t, const std::string&, const json::exception& e) {
    fail_field(where_, "JSON", "well-formed JSON", std::string("malformed JSON (") + e.what() + ")");
  }

 private:
  struct Frame {
    json* node;
    bool is_object;
    std::string key;       // the key being read (objects)
    json* slot = nullptr;  // where that key's value goes (objects)
  };

  bool scalar(json&& v) {
    value(std::move(v));
    return true;
  }

  void check_depth() const {
    if (stack_.size() > max_depth_)
      fail_field(where_, "JSON nesting", "depth <= " + std::to_string(max_depth_),
                 "depth " + std::to_string(stack_.size()));
  }

  // Places v in the open container (or at the top level) and returns its address, stable
  // until the container it is in receives another element, which happens only after any
  // container v opens is closed again.
  json* value(json&& v) {
    check_depth();
    if (++values_ > max_values_)
      fail_field(where_, "JSON", "at most " + std::to_string(max_values_) + " values",
                 "more (" + std::to_string(values_) + " read so far)");
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Frame& f = stack_.back();
    if (f.is_object) {
      *f.slot = std::move(v);
      return f.slot;
    }
    f.node->push_back(std::move(v));
    return &f.node->back();
  }

  void open(json* node, bool is_object) { stack_.push_back(Frame{node, is_object, {}, nullptr}); }

  // Dotted path of key k in the innermost object: the keys of the enclosing objects (array
  // levels add nothing), as "a.b.k".
  std::string path(const std::string& k) const {
    std::string p;
    for (size_t i = 0; i + 1 < stack_.size(); ++i)
      if (stack_[i].is_object) p += stack_[i].key + ".";
    return p + k;
  }

  json& root_;
  std::string where_;
  size_t max_depth_;
  size_t max_values_;
  size_t values_ = 0;
  std::vector<Frame> stack_;
};

}  // namespace

json parse_json_strict(std::string_view text, std::string_view where, int max_depth,
                       size_t max_values) {
  json root;
  StrictDomBuilder builder(root, where, max_depth, max_values);
  try {
    json::sax_parse(text.begin(), text.end(), &builder, json::input_format_t::json,
                    /*strict=*/true, /*ignore_comments=*/false);
  } catch (const json::exception& e) {
    fail_field(where, "JSON", "well-formed JSON", std::string("malformed JSON (") + e.what() + ")");
  }
  return root;
}

namespace {

using ordered_json = nlohmann::ordered_json;

bool is_scalar(const ordered_json& j) { return !j.is_object() && !j.is_array(); }

void emit(const ordered_json& j, int indent, std::string& out) {
  const std::string pad(size_t(indent) + 2, ' ');
  if (j.is_object()) {
    if (j.empty()) {
      out += "{}";
      return;
    }
    out += "{\n";
    bool first = true;
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (!first) out += ",\n";
      first = false;
      out += pad;
      out += ordered_json(it.key()).dump();
      out += ": ";
      emit(it.value(), indent + 2, out);
    }
    out += "\n" + std::string(size_t(indent), ' ') + "}";
  } else if (j.is_array()) {
    bool flat = true;
    for (const auto& e : j) flat = flat && is_scalar(e);
    if (j.empty()) {
      out += "[]";
    } else if (flat) {
      out += "[";
      bool first = true;
      for (const auto& e : j) {
        if (!first) out += ", ";
        first = false;
        out += e.dump();
      }
      out += "]";
    } else {
      out += "[\n";
      bool first = true;
      for (const auto& e : j) {
        if (!first) out += ",\n";
        first = false;
        out += pad;
        emit(e, indent + 2, out);
      }
      out += "\n" + std::string(size_t(indent), ' ') + "]";
    }
  } else {
    out += j.dump();
  }
}

}  // namespace

std::string pretty_json(const ordered_json& j) {
  std::string out;
  emit(j, 0, out);
  out += "\n";
  return out;
}

size_t utf8_length(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++n;  // count every byte that starts a code point
  return n;
}

}  // namespace ember
