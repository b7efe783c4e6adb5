// Export -> write -> read -> strict import -> replay against the real engine, in-process
// (fast) and as the three-process gate (the CLI), plus rejections that need a model.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <thread>

#include "kv/import.h"
#include "kv/replay.h"
#include "kv/replay_gate.h"
#include "kv/kv_test_util.h"
#include "model/engine.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace ember::test {
namespace {

namespace fs = std::filesystem;

struct Target {
  std::shared_ptr<const model::Model> model;
  std::unique_ptr<tok::Tokenizer> tok;
};

Target load_target(const std::string& path) {
  Target t;
  t.model = model::Model::load(path);
  t.tok = tok::Tokenizer::from_gguf(t.model->file());
  return t;
}

bool bits_equal(const std::vector<float>& a, const float* b, size_t n) {
  return std::memcmp(a.data(), b, n * sizeof(float)) == 0;
}

TEST(SnapshotReplay, ExportThenReplayEqualsUninterruptedBitForBit) {
  const Target t = load_target(shared_path("models/stories260K.gguf"));
  const std::vector<int32_t> prompt = t.tok->encode("Once upon a time", true);
  const int N = 12;
  const int V = t.model->config().n_vocab;
  model::Engine native_engine(t.model, {1});
  kv::ContinueOptions o;
  o.steps = N;
  o.keep_logits = true;
  const kv::Continuation native = kv::generate_native(native_engine, prompt, o);
  ASSERT_EQ(native.logits.size(), size_t(N) * V);

  model::Engine export_engine(t.model, {3});  // another thread count: same bits by contract
  kv::ExportResult ex = kv::export_prefix(export_engine, t.tok->identity(), prompt, "test");
  const kv::SnapshotManifest& m = ex.snapshot.manifest();
  EXPECT_EQ(m.geometry.positions, int(prompt.size()));
  EXPECT_EQ(ex.snapshot.cache().n_pos, int(prompt.size()));
  EXPECT_EQ(ex.snapshot.cache().capacity, int(prompt.size()));  // the resume token is not cached
  EXPECT_EQ(m.resume.position, int64_t(prompt.size()));
  EXPECT_EQ(m.resume.token, native.tokens[0]);
  EXPECT_EQ(m.prefix.tokens, prompt);
  EXPECT_EQ(m.model.identity, t.model->identity());
  EXPECT_EQ(m.representation.keys, "post-rope");
  ASSERT_TRUE(bits_equal(ex.boundary_logits, native.logits.data(), V));

  const std::string dir = temp_dir("replay") + "/snap";
  kv::write_state_dir(ex.snapshot, dir, false);
  const kv::VerifiedState back = kv::open_state(dir);
  model::Engine replay_engine(t.model, {2});
  kv::ContinueOptions ro;
  ro.steps = N - 1;
  ro.keep_logits = true;
  const kv::Continuation rep = kv::replay(back, replay_engine, t.tok->identity(), ro);
  ASSERT_EQ(rep.logits.size(), size_t(N - 1) * V);
  EXPECT_TRUE(bits_equal(rep.logits, native.logits.data() + V, size_t(N - 1) * V));
  EXPECT_EQ(std::vector<int32_t>(native.tokens.begin() + 1, native.tokens.end()), rep.tokens);

  // The same state exported twice gives byte-identical files.
  kv::ExportResult again = kv::export_prefix(native_engine, t.tok->identity(), prompt, "test");
  EXPECT_EQ(again.snapshot.manifest().to_json(), m.to_json());
}

TEST(SnapshotReplay, ReFeedingTheLastPromptTokenWouldBeWrong) {
  // The control that makes the resume-token rule visible: duplicating the last prompt token
  // at position P changes the logits, so the gate would catch that bug.
  const Target t = load_target(shared_path("models/stories260K.gguf"));
  const std::vector<int32_t> prompt = t.tok->encode("Once upon a time", true);
  model::Engine e(t.model, {1});
  kv::ExportResult ex = kv::export_prefix(e, t.tok->identity(), prompt, "test");
  kv::ContinueOptions o;
  o.steps = 1;
  o.keep_logits = true;
  const kv::Continuation good = kv::replay(ex.snapshot, e, t.tok->identity(), o);
  kv::KvState edited = std::move(ex.snapshot).release();
  edited.manifest.resume.token = prompt.back();
  edited.manifest.proof.witness_tokens.clear();  // it starts at the resume token: it would not apply
  edited.manifest.proof.witness_logits_sha256.clear();
  edited.manifest.proof.witness_attention_sha256.clear();
  const kv::Continuation bad = kv::replay(kv::seal(std::move(edited), "test"), e, t.tok->identity(), o);
  EXPECT_FALSE(bits_equal(good.logits, bad.logits.data(), good.logits.size()));
}

TEST(SnapshotReplay, ImportRefusesAnotherModelAndTokenizerBeforeDecoding) {
  const Target f32 = load_target(shared_path("models/stories260K.gguf"));
  const Target q8 = load_target(shared_path("models/stories260K-Q8_0.gguf"));
  const std::vector<int32_t> prompt = f32.tok->encode("Once upon a time", true);
  model::Engine e32(f32.model, {1}), e8(q8.model, {1});
  const kv::ExportResult ex = kv::export_prefix(e32, f32.tok->identity(), prompt, "test");
  auto error_of = [&](model::Engine& e, const std::string& tok_id) {
    try {
      kv::import_for_model(ex.snapshot, e, tok_id, 4, "snap");
    } catch (const Error& err) {
      return std::string(err.what());
    }
    return std::string();
  };
  const std::string wrong_model = error_of(e8, q8.tok->identity());
  EXPECT_EQ(wrong_model.rfind("snap: model.identity: expected " + q8.model->identity(), 0), 0u);
  // Beside the hashes, what a person recognizes: architecture and weight types of each side.
  EXPECT_NE(wrong_model.find("(target: llama, weights f16,q8_0, 5 layers)"), std::string::npos) << wrong_model;
  EXPECT_NE(wrong_model.find("(snapshot: llama, weights f32, 5 layers)"), std::string::npos) << wrong_model;
  EXPECT_EQ(error_of(e32, std::string(64, 'f')).rfind("snap: tokenizer.identity: expected ffff", 0), 0u);
  EXPECT_EQ(error_of(e32, f32.tok->identity()), "");
}

TEST(ReplayGate, VerdictNamesTheFirstDifferingBit) {
  auto bytes = [](std::vector<float> v) {
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  const auto native = bytes({1, 2, 3, 4, 5, 6});
  EXPECT_TRUE(kv::compare_replay_logits(native, bytes({1, 2}), bytes({3, 4, 5, 6}), 3).pass);
  const kv::GateVerdict v = kv::compare_replay_logits(native, bytes({1, 2}), bytes({3, 4, 5, std::nextafter(6.0f, 7.0f)}), 3);
  ASSERT_FALSE(v.pass);
  EXPECT_EQ(v.first_mismatch->row, 2);
  EXPECT_EQ(v.first_mismatch->column, 1);
  EXPECT_EQ(v.first_mismatch->source, "replay");
  // Bit equality, not ==: -0.0 differs from +0.0.
  const kv::GateVerdict z = kv::compare_replay_logits(bytes({0.0f, 2, 3, 4}), bytes({-0.0f, 2}), bytes({3, 4}), 2);
  ASSERT_FALSE(z.pass);
  EXPECT_EQ(z.first_mismatch->source, "boundary");
  EXPECT_FALSE(kv::compare_replay_logits(native, bytes({1, 2}), bytes({3, 4, 5}), 3).shape_error.empty());
}

}  // namespace
}  // namespace ember::test
