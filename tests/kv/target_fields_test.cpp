// The engine's side of the field list: describe_target fills every target row of
// kv/manifest_fields.h, so a target field added to the list but not to kv/target.cpp fails
// here (it would otherwise hold its default on both sides of every import and never be
// compared).
#include <gtest/gtest.h>

#include "kv/import.h"
#include "kv/manifest_fields.h"
#include "model/engine.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"

namespace ember::test {
namespace {

// Sets every target row to one of two poison values.
struct Poison {
  template <class T>
  void operator()(T& v, const kv::FieldSpec& f) const {
    if (!(f.roles & kv::kTarget)) return;
    if constexpr (std::is_same_v<T, std::string>) v = second ? "poison-b" : "poison-a";
    if constexpr (std::is_same_v<T, bool>) v = second;
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) v = T(second ? 8 : 7);
  }
  bool second = false;
};

TEST(TargetFields, EngineDescribesEveryTargetRow) {
  const auto m = model::Model::load(shared_path("models/stories260K.gguf"));
  const auto tok = tok::Tokenizer::from_gguf(m->file());
  const model::Engine e(m, {1});
  kv::SnapshotManifest a, b;
  kv::visit_fields(a, Poison{false});
  kv::visit_fields(b, Poison{true});
  kv::fill_target_fields(a, e, tok->identity());
  kv::fill_target_fields(b, e, tok->identity());
  // A row the engine left alone still holds its poison, which differs between a and b.
  EXPECT_EQ(a.target_fields(), b.target_fields());
  EXPECT_EQ(a.target_fields(), kv::describe_target(e, tok->identity()).target_fields());
}

}  // namespace
}  // namespace ember::test
