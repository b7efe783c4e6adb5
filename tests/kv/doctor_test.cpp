// kv doctor on every shared llama.cpp fixture (right: compatible; wrong: wrong-model, 0 false
// accepts) and on planted faults: an edited row at a known layer/head/position, two layers
// swapped, a truncated file, a V section against its layout, positions past the context, and a
// file that is not a state at all (unreadable: an Error, exit 2).
#include <gtest/gtest.h>

#include <cstring>

#include "kv/doctor.h"
#include "kv/foreign_pairings.h"
#include "kv/llamacpp_import.h"
#include "kv/llamacpp_state.h"
#include "model/engine.h"
#include "support/test_support.h"
#include "util/byte_io.h"
#include "util/error.h"
#include "util/f16.h"

namespace ember::kv::doctor_test {

struct Loaded {
  std::shared_ptr<const model::Model> model;
  std::unique_ptr<model::Engine> engine;
};

Loaded load(const std::string& gguf) {
  Loaded l;
  l.model = model::Model::load(test::shared_path("models/" + gguf));
  l.engine = std::make_unique<model::Engine>(l.model, model::EngineOptions{1});
  return l;
}

std::vector<uint8_t> fixture(const std::string& name) {
  return test::read_bytes(test::shared_path("models/llamacpp-state/" + name + ".seq"));
}

DoctorReport diagnose(const std::vector<uint8_t>& bytes, model::Engine& e, const std::string& where) {
  return diagnose_llamacpp(bytes, where, e, {}, {});
}

TEST(KvDoctor, ClassifiesEverySharedFixtureWithNoFalseAccept) {
  int accepted_wrong = 0;
  for (const foreign_pairings::Pairing& p : foreign_pairings::kPairings) {
    SCOPED_TRACE(std::string(p.file) + " with " + p.model);
    Loaded l = load(p.model);
    const DoctorReport r = diagnose(fixture(p.file), *l.engine, p.file);
    if (p.right) {
      EXPECT_EQ(r.verdict, DoctorVerdict::compatible) << r.reason;
      EXPECT_FALSE(r.heads.empty());
      EXPECT_TRUE(r.cold_measured);
      EXPECT_EQ(r.next.size(), 8u);
    } else {
      accepted_wrong += r.verdict == DoctorVerdict::compatible;
      EXPECT_EQ(r.verdict, DoctorVerdict::wrong_model) << r.reason;
    }
  }
  EXPECT_EQ(accepted_wrong, 0);
}

// Byte offsets in an f16 file with V in rows (fa1): header, tokens, cells, then per layer
// i32 type, u64 row size, P rows of kv_heads * head_dim f16 (docs/formats/llamacpp-state.md).
struct Layout {
  size_t first_layer = 0, row = 0, layer = 0;
  int P = 0;
  size_t k_row(int l, int h, int p, int D) const {
    return first_layer + size_t(l) * layer + 12 + size_t(p) * row + size_t(h) * size_t(D) * 2;
  }
  size_t v_layer(int L, int l) const { return first_layer + size_t(L + l) * layer; }
};

Layout layout_of(const std::vector<uint8_t>& b, int H, int D) {
  Layout y;
  uint32_t n = 0;
  std::memcpy(&n, b.data() + 8, 4);
  y.P = int(n);
  y.first_layer = 12 + 4 * size_t(n) + 4 + 4 + 12 * size_t(n) + 4 + 4;
  y.row = size_t(H) * size_t(D) * 2;
  y.layer = 12 + size_t(n) * y.row;
  return y;
}

TEST(KvDoctor, NamesAnEditedRow) {
  Loaded l = load("synthetic/llama-gqa-s5005.F32.gguf");
  const auto& cfg = l.engine->config();
  std::vector<uint8_t> b = fixture("llama-gqa-s5005.F32.f16.fa1");
  const Layout y = layout_of(b, cfg.n_kv_heads, cfg.head_dim);
  // Layer 2, head 1, position 10: every key element times 3.
  const size_t at = y.k_row(2, 1, 10, cfg.head_dim);
  for (int j = 0; j < cfg.head_dim; ++j) {
    uint16_t x;
    std::memcpy(&x, b.data() + at + 2 * size_t(j), 2);
    x = f32_to_f16(3 * f16_to_f32(x));
    std::memcpy(b.data() + at + 2 * size_t(j), &x, 2);
  }
  const DoctorReport r = diagnose(b, *l.engine, "edited");
  EXPECT_EQ(r.verdict, DoctorVerdict::corrupt) << r.reason;
  ASSERT_FALSE(r.bad_k.empty());
  EXPECT_EQ(r.bad_k[0].layer, 2);
  EXPECT_EQ(r.bad_k[0].head, 1);
  EXPECT_EQ(r.bad_k[0].position, 10);
  EXPECT_NE(r.reason.find("K layer 2 head 1 position 10"), std::string::npos) << r.reason;
  EXPECT_EQ(r.exit_code(), 1);
}

TEST(KvDoctor, NamesSwappedLayers) {
  Loaded l = load("synthetic/llama-gqa-s5005.F32.gguf");
  const auto& cfg = l.engine->config();
  std::vector<uint8_t> b = fixture("llama-gqa-s5005.F32.f16.fa1");
  const Layout y = layout_of(b, cfg.n_kv_heads, cfg.head_dim);
  // The K sections of layers 1 and 2 trade places (headers are equal).
  std::swap_ranges(b.begin() + long(y.first_layer + y.layer), b.begin() + long(y.first_layer + 2 * y.layer),
                   b.begin() + long(y.first_layer + 2 * y.layer));
  const DoctorReport r = diagnose(b, *l.engine, "swapped");
  EXPECT_EQ(r.verdict, DoctorVerdict::corrupt) << r.reason;
  EXPECT_NE(r.reason.find("layer 2 holds layer 1's keys"), std::string::npos) << r.reason;
}

TEST(KvDoctor, TruncatedVLayoutPastContextAndUnreadable) {
  Loaded l = load("stories260K.gguf");
  std::vector<uint8_t> b = fixture("stories260K.p2.f16.fa0");
  const DoctorReport t = diagnose({b.begin(), b.end() - 100}, *l.engine, "cut");
  EXPECT_EQ(t.verdict, DoctorVerdict::truncated) << t.reason;
  EXPECT_FALSE(t.parsed);
  // v_trans 1 -> 0 on a transposed file: the V headers no longer read as rows.
  std::vector<uint8_t> v = b;
  const Layout y = layout_of(v, 4, 8);
  const size_t v_trans_at = y.first_layer - 8;
  ASSERT_EQ(v[v_trans_at], 1);
  v[v_trans_at] = 0;
  const DoctorReport vl = diagnose(v, *l.engine, "vflag");
  EXPECT_EQ(vl.verdict, DoctorVerdict::v_layout_mismatch) << vl.reason;
  // 130 positions for a model of context 128.
  model::KvCache big(5, 4, 8, 130);
  big.n_pos = 130;
  std::vector<int32_t> ids(130, 1);
  std::vector<uint8_t> out;
  BufferSink sink(out);
  write_llamacpp_state(big, ids, true, sink);
  const DoctorReport pc = diagnose(out, *l.engine, "long");
  EXPECT_EQ(pc.verdict, DoctorVerdict::past_context) << pc.reason;
  // Not a state file: unreadable, an Error (exit 2).
  std::vector<uint8_t> junk = b;
  junk[0] = 'X';
  EXPECT_NE(test::error_of([&] { diagnose(junk, *l.engine, "junk"); }).find("junk: magic: expected"),
            std::string::npos);
}

TEST(KvDoctor, JsonAndTextCarryTheVerdict) {
  Loaded l = load("stories260K.gguf");
  const DoctorReport r = diagnose(fixture("stories260K.p2.f16.fa0"), *l.engine, "p2");
  const auto j = doctor_json(r);
  EXPECT_EQ(j["verdict"], "compatible");
  EXPECT_EQ(j["exit_code"], 0);
  EXPECT_EQ(j["keys"]["layer0"]["error"], 0.0);
  EXPECT_EQ(j["next_tokens"].size(), 8u);
  EXPECT_EQ(doctor_text(r).rfind("p2: compatible: ", 0), 0u);
}

// A foreign state ember already holds: its types come from the provenance. One imported
// without the model check under the wrong GGUF is caught by the doctor.
TEST(KvDoctor, ForeignStatesImportedEarlier) {
  Loaded right = load("synthetic/qwen2-bias-s5006.F32.gguf");
  Loaded wrong = load("synthetic/qwen2-bias-s5006.Q8_0.gguf");
  const std::vector<uint8_t> b = fixture("qwen2-bias-s5006.F32.q8_0k.fa0");
  const VerifiedState ok = import_llamacpp(b, *right.engine, test::hex64('a'), {}, "ok");
  const DoctorReport r = diagnose_foreign_state(ok, *right.engine, {}, "ok");
  EXPECT_EQ(r.verdict, DoctorVerdict::compatible) << r.reason;
  EXPECT_EQ(r.type_k, "q8_0+hadamard-64");  // head_dim 64: llama.cpp rotates K
  EXPECT_EQ(r.type_v, "f16");
  LlamaCppImportOptions skip;
  skip.model_check = false;
  const VerifiedState bad = import_llamacpp(b, *wrong.engine, test::hex64('a'), skip, "bad");
  EXPECT_NE(bad.manifest().producer.find("model check skipped"), std::string::npos);
  const DoctorReport w = diagnose_foreign_state(bad, *wrong.engine, {}, "bad");
  EXPECT_EQ(w.verdict, DoctorVerdict::wrong_model) << w.reason;
}

// The command: exit 0 compatible, 1 another verdict, JSON on --json.
TEST(KvDoctor, CommandExitCodesAndJson) {
  const std::string seq = test::shared_path("models/llamacpp-state/stories260K.p1.f16.fa0.seq");
  std::string out;
  EXPECT_EQ(test::run_command(test::ember_binary() + " kv doctor " + seq + " --model " +
                                  test::shared_path("models/stories260K.gguf") + " --json",
                              &out),
            0)
      << out;
  EXPECT_NE(out.find("\"verdict\": \"compatible\""), std::string::npos) << out;
  EXPECT_EQ(test::run_command(test::ember_binary() + " kv doctor " + seq + " --model " +
                                  test::shared_path("models/stories260K-kjv-top.gguf"),
                              &out),
            1)
      << out;
  EXPECT_NE(out.find(": wrong-model: "), std::string::npos) << out;
}

}  // namespace ember::kv::doctor_test
