// The field lists (kv/manifest_fields.h) are the one place a manifest field is stated: what the
// writer writes, the reader requires, validate() checks, target_fields() compares and the
// engine describes (target_fields_test.cpp) are each checked against the list, for every
// kind's schema: a field added to a list is written, required, checked and compared, or a test
// here names it.
#include <gtest/gtest.h>

#include <set>

#include "kv/kv_test_util.h"
#include "kv/manifest_fields.h"
#include "util/error.h"

namespace ember::test {
namespace {

struct Row {
  std::string object;  // "" (the manifest), "mapping" or "foreign"
  std::string name;    // with the object in front: "mapping.kind"
  kv::FieldSpec spec;
};

template <class S>
std::vector<Row> rows_of(const S& s, const std::string& object) {
  std::vector<Row> out;
  kv::visit_fields(s, [&](const auto&, const kv::FieldSpec& f) {
    out.push_back({object, object.empty() ? f.path : object + "." + f.path, f});
  });
  return out;
}

// One state per kind, with every optional field set, so that every row is written.
kv::StateHeader header_of(kv::StateKind kind) {
  kv::StateHeader h = make_snapshot(2, 1, 4, 3).header();
  h.manifest.past_context = true;
  h.manifest.proof.boundary_logits_sha256 = sha256_hex("logits");
  h.manifest.proof.witness_tokens = {h.manifest.resume.token, 7};
  h.manifest.proof.witness_logits_sha256 = sha256_hex("witness logits");
  h.manifest.proof.witness_attention_sha256 = {sha256_hex("layer 0"), sha256_hex("layer 1")};
  if (kind == kv::StateKind::mapped) {
    kv::MappedProvenance p = test_mapping(2, h.manifest.prefix.sha256);
    p.registration = "unregistered";
    h.provenance = p;
  }
  if (kind == kv::StateKind::foreign) {
    kv::ForeignProvenance p;
    p.engine = "llama.cpp";
    p.format = "ggsq";
    p.format_version = 3;
    p.cache_type_k = p.cache_type_v = "f16";
    p.conversion = "exact";
    p.resume_source = "argument";
    p.source_sha256 = sha256_hex("source");
    p.source_bytes = 100;
    p.details = {{"v_layout", "rows"}, {"k_rotation", "none"}, {"v_rotation", "none"}};
    h.provenance = p;
    h.manifest.numerics.contract = kv::kForeignContract;
  }
  return h;
}

// Every row of the document's schemas: the manifest's, its provenance's, and the seal.
std::vector<Row> all_rows(const kv::StateHeader& h) {
  std::vector<Row> rows = rows_of(h.manifest, "");
  std::vector<Row> more;
  if (const kv::MappedProvenance* p = h.mapping()) more = rows_of(*p, "mapping");
  if (const kv::ForeignProvenance* p = h.foreign()) more = rows_of(*p, "foreign");
  rows.insert(rows.end(), more.begin(), more.end());
  return rows;
}

// The leaves of a written document, depth first, in key order; a listed object (a row whose
// value is an object, like foreign.details) counts as one leaf.
void flatten(const kv::ordered_json& j, const std::string& path, const std::set<std::string>& listed,
             std::vector<std::string>& out) {
  if (!j.is_object() || listed.count(path)) {
    out.push_back(path);
    return;
  }
  for (auto it = j.begin(); it != j.end(); ++it) flatten(*it, path.empty() ? it.key() : path + "." + it.key(), listed, out);
}

kv::ordered_json document_of(const kv::StateHeader& h) {
  return kv::ordered_json::parse(kv::state_manifest_json(h, "test"));
}

// The parse error of the document after `edit` (resealed, so only the edit is refused), or "".
std::string error_after(const kv::StateHeader& h, const std::function<void(kv::ordered_json&)>& edit) {
  kv::ordered_json j = document_of(h);
  edit(j);
  j[kv::kSealKey] = kv::manifest_seal(nlohmann::json(j));
  try {
    kv::parse_state_manifest(kv::pretty_json(j), "m.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The object holding `name` in `j` ("rope.scaling.type": j["rope"]["scaling"]) and its key.
std::pair<kv::ordered_json*, std::string> locate(kv::ordered_json& j, const std::string& name) {
  kv::ordered_json* at = &j;
  size_t from = 0;
  for (size_t dot; (dot = name.find('.', from)) != std::string::npos; from = dot + 1)
    at = &(*at)[name.substr(from, dot - from)];
  return {at, name.substr(from)};
}

const kv::StateKind kKinds[] = {kv::StateKind::native, kv::StateKind::mapped, kv::StateKind::foreign};

TEST(FieldList, WriterWritesEveryRowInListOrder) {
  for (kv::StateKind kind : kKinds) {
    const kv::StateHeader h = header_of(kind);
    std::vector<std::string> want;
    std::set<std::string> listed;
    for (const Row& r : all_rows(h)) {
      want.push_back(r.name);
      listed.insert(r.name);
    }
    want.push_back(kv::kSealKey);
    std::vector<std::string> written;
    flatten(document_of(h), "", listed, written);
    EXPECT_EQ(written, want) << "kind " << int(kind);
  }
}

TEST(FieldList, ReaderRequiresEveryRowAndNoOther) {
  for (kv::StateKind kind : kKinds) {
    const kv::StateHeader h = header_of(kind);
    ASSERT_EQ(error_after(h, [](kv::ordered_json&) {}), "");
    std::set<std::string> objects = {""};
    for (const Row& r : all_rows(h)) {
      SCOPED_TRACE(r.name);
      const std::string err = error_after(h, [&](kv::ordered_json& j) {
        auto [obj, key] = locate(j, r.name);
        obj->erase(key);
      });
      if (r.name.rfind("proof.witness_", 0) == 0)
        EXPECT_NE(err.find("proof.witness_"), std::string::npos) << err;  // the witness is all or none
      else if (r.spec.roles & kv::kOptional)
        EXPECT_EQ(err, "");  // an optional row read back absent is the canonical document
      else if (r.spec.missing)
        EXPECT_NE(err.find(r.name + ": expected " + r.spec.missing + ", found none"), std::string::npos) << err;
      else
        EXPECT_NE(err.find(r.name + ": expected present, found missing"), std::string::npos) << err;
      for (size_t dot = r.name.find('.'); dot != std::string::npos; dot = r.name.find('.', dot + 1))
        objects.insert(r.name.substr(0, dot));
      if (!r.spec.members.empty()) objects.insert(r.name);
    }
    for (const std::string& o : objects) {
      const std::string name = o.empty() ? "zz_unknown" : o + ".zz_unknown";
      const std::string err = error_after(h, [&](kv::ordered_json& j) {
        auto [obj, key] = locate(j, name);
        (*obj)[key] = 1;
      });
      EXPECT_NE(err.find(name + ": expected no such key, found an unknown key"), std::string::npos) << err;
    }
  }
}

// Breaks the visited value so that its rule refuses it (nothing when it has no rule).
struct Breaker {
  template <class T>
  void operator()(T& v, const kv::FieldSpec& f) const {
    if (f.path != target) return;
    if constexpr (std::is_same_v<T, std::string>) v = "\x01 not allowed";
    if constexpr (std::is_same_v<T, std::vector<std::string>>) v.back() = "\x01 not allowed";
    if constexpr (std::is_same_v<T, float>) v = -1.0f;
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
      v = T(f.rule.kind == kv::Rule::equal_to ? f.rule.value + 1 : f.limits.lo - 1);
  }
  std::string target;
};

TEST(FieldList, EveryRuleIsCheckedAndNamesItsField) {
  for (kv::StateKind kind : kKinds) {
    const kv::StateHeader h = header_of(kind);
    for (const Row& r : all_rows(h)) {
      if (r.spec.rule.kind == kv::Rule::none) continue;
      SCOPED_TRACE(r.name);
      kv::StateHeader broken = h;
      const Breaker b{r.spec.path};
      if (r.object.empty())
        kv::visit_fields(broken.manifest, b);
      else if (r.object == "mapping")
        kv::visit_fields(std::get<kv::MappedProvenance>(broken.provenance), b);
      else
        kv::visit_fields(std::get<kv::ForeignProvenance>(broken.provenance), b);
      try {
        kv::state_manifest_json(broken, "m.json");
        ADD_FAILURE() << "accepted";
      } catch (const Error& e) {
        const std::string err = e.what();
        // A list's rule names the broken element (the last).
        std::string element;
        if (r.spec.path == std::string("layer_roles")) element = "[1]";
        if (r.spec.path == std::string("proof.blocks"))
          element = "[" + std::to_string(h.manifest.proof.blocks.size() - 1) + "]";
        if (r.spec.path == std::string("proof.witness_attention_sha256"))
          element = "[" + std::to_string(h.manifest.proof.witness_attention_sha256.size() - 1) + "]";
        EXPECT_EQ(err.rfind("m.json: " + r.name + element + ": expected ", 0),
                  0u)
            << err;
      }
    }
  }
}

TEST(FieldList, TargetFieldsAreTheTargetRowsInListOrder) {
  const kv::StateHeader h = header_of(kv::StateKind::native);
  std::vector<std::string> want, got;
  for (const Row& r : rows_of(h.manifest, ""))
    if (r.spec.roles & kv::kTarget) want.push_back(r.name);
  for (const auto& [name, value] : h.manifest.target_fields()) got.push_back(name);
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace ember::test
