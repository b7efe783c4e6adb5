// Perturbation receipts: typed, canonical, bound to their source, applied only in memory.
#include <gtest/gtest.h>

#include <limits>
#include <type_traits>

#include "analysis/compare.h"
#include "analysis/compare_fixtures.h"
#include "analysis/perturb.h"
#include "support/test_support.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/f16.h"
#include "util/sha256.h"

namespace ember::analysis {
namespace {

using testing::copy_state;
using testing::synthetic_state;

// A perturbed state is its own type: it cannot become a ComparedState (the input of every
// snapshot-producing path) nor be copied into one.
static_assert(!std::is_convertible_v<PerturbedState, ComparedState>);
static_assert(!std::is_constructible_v<ComparedState, PerturbedState>);
static_assert(!std::is_default_constructible_v<PerturbedState>);
static_assert(!std::is_copy_constructible_v<PerturbedState>);

PerturbSpec spec(int layer, int head, PerturbPart part, bool zero, float scale = 1.0f) {
  PerturbSpec s;
  s.layer = layer;
  s.head = head;
  s.part = part;
  s.zero = zero;
  s.scale_bits = f32_to_bits(scale);
  return s;
}

TEST(Perturb, ScaleOneChangesNoBit) {
  const ComparedState src = synthetic_state(3, 2, 8, 6, 4);
  const PerturbReceipt r = make_receipt(src, spec(1, 1, PerturbPart::kv, false, 1.0f));
  EXPECT_EQ(r.changed_k, 0u);
  EXPECT_EQ(r.changed_v, 0u);
  EXPECT_EQ(r.affected_k, 48u);
  EXPECT_EQ(r.affected_v, 48u);
  const PerturbedState p = apply_perturbation(copy_state(src), r);
  EXPECT_EQ(p.state().cache.k, src.cache.k);
  EXPECT_EQ(p.state().cache.v, src.cache.v);
  const CompareReport rep = compare_states(src, p, CompareOptions{});
  EXPECT_TRUE(rep.metrics.identical());
  EXPECT_EQ(rep.perturbation_receipt_sha256, sha256_hex(receipt_json(r)));
}

TEST(Perturb, ZeroKvOfOneHeadIsLocalized) {
  const ComparedState src = synthetic_state(3, 4, 8, 6, 4);
  const PerturbReceipt r = make_receipt(src, spec(0, 0, PerturbPart::kv, true));
  EXPECT_GT(r.changed_k, 0u);
  EXPECT_GT(r.changed_v, 0u);
  const PerturbedState p = apply_perturbation(copy_state(src), r);
  EXPECT_EQ(p.state().identity.kind, "perturbed");
  EXPECT_TRUE(p.state().identity.snapshot_id.empty());
  for (int pos = 0; pos < 6; ++pos) {
    for (int d = 0; d < 8; ++d) {
      EXPECT_EQ(p.state().cache.k_row(0, 0, pos)[d], 0);
      EXPECT_EQ(p.state().cache.v_row(0, 0, pos)[d], 0);
    }
  }
  const CompareReport rep = compare_states(src, p, CompareOptions{});
  for (int l = 0; l < 3; ++l) {
    for (int h = 0; h < 4; ++h) {
      const bool hit = l == 0 && h == 0;
      EXPECT_EQ(rep.metrics.at(l, h).k.mismatches, hit ? r.changed_k : 0u);
      EXPECT_EQ(rep.metrics.at(l, h).v.mismatches, hit ? r.changed_v : 0u);
      if (!hit) {
        EXPECT_EQ(*rep.metrics.at(l, h).k.mse, 0.0);
      }
    }
  }
  EXPECT_EQ(*rep.metrics.at(0, 0).k.cosine, 0.0);
  EXPECT_NE(report_json(rep).find("\"receipt_sha256\": \"" + rep.perturbation_receipt_sha256),
            std::string::npos);
}

TEST(Perturb, ScaleOnlyTouchesTheSelectedPart) {
  const ComparedState src = synthetic_state(2, 2, 8, 6, 4);
  const PerturbReceipt r = make_receipt(src, spec(1, 0, PerturbPart::k, false, 0.5f));
  EXPECT_EQ(r.affected_v, 0u);
  EXPECT_EQ(r.changed_v, 0u);
  const PerturbedState p = apply_perturbation(copy_state(src), r);
  EXPECT_EQ(p.state().cache.v, src.cache.v);
  const uint16_t before = src.cache.k_row(1, 0, 3)[2];
  EXPECT_EQ(p.state().cache.k_row(1, 0, 3)[2], f32_to_f16(f16_to_f32(before) * 0.5f));
}

TEST(Perturb, ReceiptIsCanonicalAndRoundTrips) {
  const ComparedState src = synthetic_state(2, 2, 8, 6, 4);
  const PerturbReceipt r = make_receipt(src, spec(1, 1, PerturbPart::v, false, 0.1f));
  const std::string text = receipt_json(r);
  EXPECT_NE(text.find("\"scale_f32_bits\": \"0x3dcccccd\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"writes_cache\": false"), std::string::npos);
  const PerturbReceipt back = parse_receipt(text, "receipt.json");
  EXPECT_EQ(receipt_json(back), text);
  EXPECT_EQ(back.spec.scale_bits, f32_to_bits(0.1f));

  const std::string dir = test::temp_dir("receipt");
  write_receipt(dir + "/r.json", r, false);
  EXPECT_THROW(write_receipt(dir + "/r.json", r, false), Error);  // no overwrite
  EXPECT_EQ(read_file(dir + "/r.json"), text);
}

TEST(Perturb, EditedOrMalformedReceiptsAreRefused) {
  const ComparedState src = synthetic_state(2, 2, 8, 6, 4);
  const std::string text = receipt_json(make_receipt(src, spec(1, 1, PerturbPart::v, true)));
  auto edited = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    const size_t at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return t.replace(at, from.size(), to);
  };
  EXPECT_THROW(parse_receipt(edited("\"writes_cache\": false", "\"writes_cache\": true"), "r"), Error);
  EXPECT_THROW(parse_receipt(edited("\"kind\": \"zero\"", "\"kind\": \"shift\""), "r"), Error);
  EXPECT_THROW(parse_receipt(edited("ember.kv-perturbation-receipt", "other"), "r"), Error);
  EXPECT_THROW(parse_receipt(text.substr(0, text.size() / 2), "r"), Error);
  EXPECT_THROW(parse_receipt(edited("{\n", "{\n  \"extra\": 1,\n"), "r"), Error);
  try {
    parse_receipt(edited("\"part\": \"v\"", "\"part\": \"q\""), "r.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--part"), std::string::npos) << e.what();
  }
}

TEST(Perturb, AppliesOnlyToItsSourceSnapshot) {
  const ComparedState src = synthetic_state(2, 2, 8, 6, 4);
  const PerturbReceipt r = make_receipt(src, spec(0, 1, PerturbPart::kv, true));
  {
    ComparedState other = copy_state(src);
    other.identity.snapshot_id = std::string(64, 'f');
    EXPECT_THROW(apply_perturbation(std::move(other), r), Error);
  }
  {
    ComparedState other = copy_state(src);  // same claimed id, different contents
    other.cache.k_row(1, 1, 0)[0] ^= 1;
    try {
      apply_perturbation(std::move(other), r);
      FAIL();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("source.keys_sha256"), std::string::npos) << e.what();
    }
  }
  {
    ComparedState other = copy_state(src);
    other.identity.model_identity = std::string(64, '9');
    EXPECT_THROW(apply_perturbation(std::move(other), r), Error);
  }
  {
    ComparedState mapped = copy_state(src);
    mapped.identity.kind = "mapped";
    EXPECT_THROW(apply_perturbation(std::move(mapped), r), Error);
    ComparedState mapped2 = copy_state(src);
    mapped2.identity.kind = "mapped";
    EXPECT_THROW(make_receipt(mapped2, spec(0, 1, PerturbPart::kv, true)), Error);
  }
  {
    PerturbReceipt wrong = r;
    wrong.changed_k += 1;  // a receipt that claims a different effect
    EXPECT_THROW(apply_perturbation(copy_state(src), wrong), Error);
  }
}

TEST(Perturb, SpecIsChecked) {
  const ComparedState src = synthetic_state(2, 2, 8, 6, 4);
  EXPECT_THROW(make_receipt(src, spec(2, 0, PerturbPart::k, true)), Error);
  EXPECT_THROW(make_receipt(src, spec(0, -1, PerturbPart::k, true)), Error);
  EXPECT_THROW(make_receipt(src, spec(0, 0, PerturbPart::k, false, std::numeric_limits<float>::infinity())), Error);
  EXPECT_THROW(parse_perturb_part("q"), Error);
}

// Issue 35, item 6: `kv perturb --scale 65536` wrote a receipt whose cache holds inf (f16
// overflows past 65504), and `kv compare --perturb` used those K without --allow-non-finite,
// the one opt-in. Checked failing before: make_receipt and apply_perturbation both accepted it.
TEST(Perturb, AScaleThatOverflowsF16IsRefusedUnlessNonFiniteIsAllowed) {
  const ComparedState src = synthetic_state(2, 2, 4, 3, 5);
  const std::string e = test::error_of([&] { make_receipt(src, spec(1, 0, PerturbPart::k, false, 65536.0f)); });
  EXPECT_EQ(e.rfind("kv perturb: --scale 65536: K layer 1 kv_head 0 position ", 0), 0u) << e;
  EXPECT_NE(e.find(": expected finite after the perturbation, found inf from "), std::string::npos) << e;
  EXPECT_NE(e.find("(f16's largest value is 65504)"), std::string::npos) << e;
  // A receipt written by hand (or by an older ember) is refused when it is applied.
  PerturbReceipt r = make_receipt(src, spec(1, 0, PerturbPart::k, false, 2.0f));
  r.spec.scale_bits = f32_to_bits(65536.0f);
  r.changed_k = 0;
  const uint16_t* row = src.cache.k_row(1, 0, 0);
  for (int i = 0; i < 3 * 4; ++i) r.changed_k += f32_to_f16(f16_to_f32(row[i]) * 65536.0f) != row[i];
  const std::string a = test::error_of([&] { apply_perturbation(copy_state(src), r); });
  EXPECT_EQ(a.rfind("perturbation receipt: K layer 1 kv_head 0 position ", 0), 0u) << a;
  EXPECT_NE(a.find("expected finite after the perturbation, found inf (kv compare --allow-non-finite analyses it "
                   "anyway)"),
            std::string::npos)
      << a;
  const PerturbedState p = apply_perturbation(copy_state(src), r, /*allow_non_finite=*/true);
  EXPECT_EQ(p.state().identity.kind, "perturbed");
  // A scale that stays inside f16 is still fine.
  EXPECT_EQ(test::error_of([&] { make_receipt(src, spec(1, 0, PerturbPart::kv, false, 2.0f)); }), "");
}

}  // namespace
}  // namespace ember::analysis
