// The jobs the field lists drive (kv/manifest_fields.h): the JSON writer, the strict reader,
// the per-field rules and the target values. Each is one visitor; none names a field.
#include "kv/manifest_fields.h"

#include <cmath>

#include "gguf/arch.h"
#include "kv/manifest_rules.h"
#include "util/error.h"
#include "util/hex.h"

namespace ember::kv {
namespace {

using DetailPairs = std::vector<std::pair<std::string, std::string>>;

// "rope.scaling.type" -> the objects {"rope", "scaling"} and the key "type".
std::vector<std::string> parents_of(const std::string& path) {
  std::vector<std::string> out;
  for (size_t from = 0, dot; (dot = path.find('.', from)) != std::string::npos; from = dot + 1)
    out.push_back(path.substr(from, dot - from));
  return out;
}

std::string key_of(const std::string& path) { return path.substr(path.rfind('.') + 1); }

std::string name_of(const std::string& object, const FieldSpec& f) {
  return object.empty() ? f.path : object + "." + f.path;
}

// The canonical text of an f32 field: the digits the JSON writer gives double(f).
std::string f32_text(float f) { return ordered_json(double(f)).dump(); }

// The manifest version a schema's fields are judged by: the manifest's own; the provenance
// objects have one version.
int version_of(const SnapshotManifest& m) { return m.version; }
int version_of(const MappedProvenance&) { return kSnapshotVersion; }
int version_of(const ForeignProvenance&) { return kSnapshotVersion; }

class JsonWriter {
 public:
  JsonWriter(ordered_json& root, int version) : root_(root), version_(version) {}

  template <class T>
  void operator()(const T& v, const FieldSpec& f) {
    if (f.since > version_) return;
    if ((f.roles & kOptional) && v == T{}) return;
    ordered_json& o = parent(f.path);
    const std::string key = key_of(f.path);
    if constexpr (std::is_same_v<T, std::vector<int32_t>>) {
      if (f.roles & kCount) {
        o[key] = v.size();
      } else {
        ordered_json a = ordered_json::array();
        for (int32_t t : v) a.push_back(t);
        o[key] = std::move(a);
      }
    } else if constexpr (std::is_same_v<T, DetailPairs>) {
      ordered_json d = ordered_json::object();
      for (const auto& [k, x] : v) d[k] = x;
      o[key] = std::move(d);
    } else if constexpr (std::is_same_v<T, float>) {
      o[key] = double(v);
    } else {
      o[key] = v;
    }
  }

 private:
  // The object holding the field, created (in list order, so keys keep it) on first use.
  ordered_json& parent(const std::string& path) {
    ordered_json* at = &root_;
    for (const std::string& p : parents_of(path)) at = &(*at)[p];
    return *at;
  }
  ordered_json& root_;
  int version_;
};

// Opens nested objects as the list enters them and closes each (done(): no unknown key) as it
// leaves, so every object is checked in the order the old hand-written reader checked it.
class FieldReader {
 public:
  explicit FieldReader(StrictObject& root) : root_(root) {}

  template <class T>
  void operator()(T& v, const FieldSpec& f) {
    if (f.roles & kFormatTag) return;
    if (f.since > version_) return;  // not in this version's document (done() refuses it there)
    StrictObject& o = enter(parents_of(f.path));
    const std::string key = key_of(f.path);
    if (f.roles & kCount) count_key_ = key;
    if ((f.roles & kOptional) && !o.has(key)) {
      if (f.roles & kCount) {
        count_ = 0;  // the list it counts, if present, must then be empty
      } else if constexpr (std::is_same_v<T, std::vector<int32_t>>) {
        if (count_ > 0)  // counted, so it is not optional any more
          fail_field(o.where(), o.field(key), std::to_string(count_) + " ids (" + o.field(count_key_) + ")", "none");
      }
      return;
    }
    if (f.missing && !o.has(key)) fail_field(o.where(), o.field(key), f.missing, "none");
    if constexpr (std::is_same_v<T, std::string>) {
      v = o.string(key, f.limits.hi);
    } else if constexpr (std::is_same_v<T, int>) {
      if (f.roles & kVersionTag) {
        v = int(o.integer(key, 0, INT32_MAX));
        if (v < f.limits.lo || uint64_t(v) > f.limits.hi)
          fail_field(o.where(), o.field(key),
                     std::to_string(f.limits.lo) + ".." + std::to_string(f.limits.hi) + " (this reader)",
                     std::to_string(v));
        version_ = v;
      } else {
        v = int(o.integer(key, f.limits.lo, int64_t(f.limits.hi)));
      }
    } else if constexpr (std::is_same_v<T, int64_t>) {
      v = o.integer(key, f.limits.lo, int64_t(f.limits.hi));
    } else if constexpr (std::is_same_v<T, uint64_t>) {
      v = o.unsigned_integer(key, f.limits.hi);
    } else if constexpr (std::is_same_v<T, float>) {
      v = o.f32(key);
    } else if constexpr (std::is_same_v<T, bool>) {
      v = o.boolean(key);
      // An optional flag is written only when true: a false one is no canonical document.
      if ((f.roles & kOptional) && !v) fail_field(o.where(), o.field(key), "true (or the key absent)", "false");
    } else if constexpr (std::is_same_v<T, std::vector<int32_t>>) {
      if (f.roles & kCount)
        count_ = o.integer(key, f.limits.lo, int64_t(f.limits.hi));
      else
        read_tokens(o, key, v);
    } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
      const nlohmann::json& a = o.array(key);
      v.reserve(a.size());
      for (size_t i = 0; i < a.size(); ++i) {
        if (!a[i].is_string()) fail_field(o.where(), o.element(key, i), "a string", json_type_name(a[i]));
        const std::string& x = a[i].template get_ref<const std::string&>();
        if (f.limits.hi && x.size() > f.limits.hi)
          fail_field(o.where(), o.element(key, i), "at most " + std::to_string(f.limits.hi) + " characters",
                     std::to_string(x.size()) + " characters");
        v.push_back(x);
      }
    } else {
      static_assert(std::is_same_v<T, DetailPairs>, "a field type the reader does not know");
      StrictObject d = o.object(key);
      for (const char* k : f.members) v.emplace_back(k, d.string(k, f.limits.hi));
      d.done();  // a member the list does not name is refused here
    }
  }

  // Closes the objects still open; the caller closes the root.
  void close() { enter({}); }

 private:
  StrictObject& enter(const std::vector<std::string>& parents) {
    size_t common = 0;
    while (common < open_.size() && common < parents.size() && open_[common].first == parents[common]) ++common;
    while (open_.size() > common) {
      open_.back().second.done();
      open_.pop_back();
    }
    for (size_t i = common; i < parents.size(); ++i) {
      StrictObject next = (open_.empty() ? root_ : open_.back().second).object(parents[i]);
      open_.emplace_back(parents[i], std::move(next));
    }
    return open_.empty() ? root_ : open_.back().second;
  }

  // The ids of a token list whose count the kCount field before it read.
  void read_tokens(StrictObject& o, const std::string& key, std::vector<int32_t>& out) const {
    const nlohmann::json& toks = o.array(key);
    if (int64_t(toks.size()) != count_)
      fail_field(o.where(), o.field(key), std::to_string(count_) + " ids (" + o.field(count_key_) + ")",
                 std::to_string(toks.size()) + " ids");
    out.reserve(toks.size());
    for (size_t i = 0; i < toks.size(); ++i) {
      const auto& t = toks[i];
      if (!t.is_number_integer() || (!t.is_number_unsigned() && t.get<int64_t>() < 0) ||
          t.get<uint64_t>() > uint64_t(INT32_MAX))
        fail_field(o.where(), o.element(key, i), "a token id >= 0", t.dump());
      out.push_back(int32_t(t.get<int64_t>()));
    }
  }

  StrictObject& root_;
  std::vector<std::pair<std::string, StrictObject>> open_;
  int64_t count_ = -1;
  std::string count_key_;  // the kCount field count_ came from ("count", "witness_length")
  int version_ = kSnapshotVersion;  // the document's, once its kVersionTag field is read
};

void check_text(const std::string& where, const std::string& name, const Rule& r, const std::string& v) {
  switch (r.kind) {
    case Rule::none: return;
    case Rule::equal_to:
      if (v != r.text) fail_field(where, name, r.text, quote(v));
      return;
    case Rule::one_of: return require_one_of(where, name, v, r.allowed);
    case Rule::hex64: return require_hex64(where, name, v);
    case Rule::hex64_or_empty:
      if (!v.empty()) require_hex64(where, name, v);
      return;
    case Rule::printable:
      if (!is_printable_ascii(v)) fail_field(where, name, "printable ASCII", quote(v));
      return;
    case Rule::non_empty:
      if (v.empty() || !is_printable_ascii(v)) fail_field(where, name, r.text, quote(v));
      return;
    case Rule::architecture:
      if (!gguf::find_arch(v)) fail_field(where, name, "one of " + gguf::arch_names("|"), quote(v));
      return;
    default: EMBER_CHECK(false && "not a rule for a string");
  }
}

class RuleChecker {
 public:
  RuleChecker(const std::string& where, std::string object, int version)
      : where_(where), object_(std::move(object)), version_(version) {}

  template <class T>
  void operator()(const T& v, const FieldSpec& f) const {
    const Rule& r = f.rule;
    if (r.kind == Rule::none || f.since > version_) return;
    const std::string name = name_of(object_, f);
    if constexpr (std::is_same_v<T, std::string>) {
      check_text(where_, name, r, v);
    } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
      for (size_t i = 0; i < v.size(); ++i) check_text(where_, name + "[" + std::to_string(i) + "]", r, v[i]);
    } else if constexpr (std::is_same_v<T, float>) {
      EMBER_CHECK(r.kind == Rule::positive);
      if (!(v > 0) || !std::isfinite(v)) fail_field(where_, name, "a finite value > 0", f32_text(v));
    } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      const int64_t x = int64_t(v);
      if (r.kind == Rule::equal_to && x != r.value) fail_field(where_, name, std::to_string(r.value), std::to_string(x));
      if (r.kind == Rule::in_limits) require_range(where_, name, x, f.limits.lo, int64_t(f.limits.hi));
    } else {
      EMBER_CHECK(false && "no rule applies to this field type");
    }
  }

 private:
  const std::string& where_;
  std::string object_;
  int version_;
};

template <class S>
ordered_json write_all(const S& s) {
  ordered_json j = ordered_json::object();
  visit_fields(s, JsonWriter(j, version_of(s)));
  return j;
}

template <class S>
void read_all(StrictObject& o, S& s) {
  FieldReader r(o);
  visit_fields(s, r);
  r.close();
}

}  // namespace

ordered_json write_fields(const SnapshotManifest& m) { return write_all(m); }
ordered_json write_fields(const MappedProvenance& p) { return write_all(p); }
ordered_json write_fields(const ForeignProvenance& p) { return write_all(p); }

void read_fields(StrictObject& o, SnapshotManifest& m) { read_all(o, m); }
void read_fields(StrictObject& o, MappedProvenance& p) { read_all(o, p); }
void read_fields(StrictObject& o, ForeignProvenance& p) { read_all(o, p); }

void check_field_rules(const SnapshotManifest& m, const std::string& where) {
  visit_fields(m, RuleChecker(where, "", m.version));
}
void check_field_rules(const MappedProvenance& p, const std::string& where) {
  visit_fields(p, RuleChecker(where, "mapping", kSnapshotVersion));
}
void check_field_rules(const ForeignProvenance& p, const std::string& where) {
  visit_fields(p, RuleChecker(where, "foreign", kSnapshotVersion));
}

std::vector<std::pair<std::string, std::string>> target_values(const SnapshotManifest& m) {
  std::vector<std::pair<std::string, std::string>> out;
  visit_fields(m, [&](const auto& v, const FieldSpec& f) {
    using T = std::decay_t<decltype(v)>;
    if (!(f.roles & kTarget)) return;
    if constexpr (std::is_same_v<T, std::string>)
      out.emplace_back(f.path, v);
    else if constexpr (std::is_same_v<T, bool>)
      out.emplace_back(f.path, v ? "true" : "false");
    else if constexpr (std::is_same_v<T, float>)
      out.emplace_back(f.path, f32_text(v));
    else if constexpr (std::is_integral_v<T>)
      out.emplace_back(f.path, std::to_string(v));
    else
      EMBER_CHECK(false && "a target field is a scalar");
  });
  return out;
}

// ---- The rule messages (kv/manifest_rules.h) ----------------------------------------------------

std::string quote(const std::string& s) { return "'" + s + "'"; }

bool is_printable_ascii(const std::string& s) {
  for (unsigned char c : s)
    if (c < 0x20 || c > 0x7e) return false;
  return true;
}

void require_hex64(const std::string& where, const std::string& field, const std::string& v) {
  if (!is_hex(v, 64)) fail_field(where, field, "64 lowercase hex digits (SHA-256)", quote(v));
}

void require_one_of(const std::string& where, const std::string& field, const std::string& v,
                    std::span<const char* const> allowed) {
  std::string list;
  for (const char* a : allowed) {
    if (v == a) return;
    list += (list.empty() ? "" : "|") + std::string(a);
  }
  fail_field(where, field, "one of " + list, quote(v));
}

void require_one_of(const std::string& where, const std::string& field, const std::string& v,
                    std::initializer_list<const char*> allowed) {
  require_one_of(where, field, v, std::span<const char* const>(allowed.begin(), allowed.size()));
}

void require_range(const std::string& where, const std::string& field, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi)
    fail_field(where, field, "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]",
               std::to_string(v));
}

}  // namespace ember::kv
