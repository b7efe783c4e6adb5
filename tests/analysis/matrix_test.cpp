// kv matrix as a library (analysis/matrix.h): the variant grammar and its refusals by field,
// a small in-process matrix on stories260K in which every cell passes and the zeroing control
// is detected and localized, and corrupted cells reported as failing (a re-sealed edit that
// only the gate can see; an unsealed one the import refuses; a model that does not load).
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "analysis/matrix.h"
#include "kv/seal.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace ember::test {
namespace {

using analysis::MatrixVariant;

TEST(MatrixVariants, GrammarRolesAndDefaults) {
  const std::vector<MatrixVariant> v =
      analysis::parse_variants(" t1 ;t1-2-3; t2-1 ,simd=avx2/scalar;simd=scalar;simd=default/scalar/default");
  ASSERT_EQ(v.size(), 5u);
  EXPECT_EQ(v[0].spec, "t1");
  EXPECT_EQ(v[0].threads, (std::array<int, 3>{1, 1, 1}));
  EXPECT_FALSE(v[0].simd[0] || v[0].simd[1] || v[0].simd[2]);
  EXPECT_EQ(v[1].threads, (std::array<int, 3>{1, 2, 3}));
  EXPECT_EQ(v[2].spec, "t2-1 ,simd=avx2/scalar");
  EXPECT_EQ(v[2].threads, (std::array<int, 3>{2, 1, 1}));  // the last role repeats
  EXPECT_EQ(v[2].simd[0], SimdLevel::avx2);
  EXPECT_EQ(v[2].simd[2], SimdLevel::scalar);
  EXPECT_EQ(v[3].threads, (std::array<int, 3>{0, 0, 0}));  // the matrix's --threads
  EXPECT_EQ(v[3].simd[1], SimdLevel::scalar);
  EXPECT_FALSE(v[4].simd[0]);
  EXPECT_EQ(v[4].simd[1], SimdLevel::scalar);
  EXPECT_FALSE(v[4].simd[2]);
  EXPECT_EQ(analysis::parse_variants(analysis::kDefaultVariants).size(), 5u);
}

TEST(MatrixVariants, RefusedByField) {
  const auto err = [](const std::string& s) { return error_of([&] { analysis::parse_variants(s); }); };
  EXPECT_EQ(err("t1;t0"), "--variants: variant 2 threads: expected t N[-N[-N]] with N in 1..256 (threads of "
                          "native, export, replay), found 't0'");
  EXPECT_EQ(err("simd=avx9"), "--variants: variant 1 simd: expected simd=P[/P[/P]] with P in scalar, avx2, "
                              "avx512, avx512vnni, default (paths of native, export, replay), found 'simd=avx9'");
  EXPECT_EQ(err("t1;threads=2"), "--variants: variant 2 item: expected t N[-N[-N]] or simd=P[/P[/P]], found "
                                 "'threads=2'");
  EXPECT_EQ(err("t1;;t2"), "--variants: variant 2: expected t N[-N[-N]] and/or simd=P[/P[/P]], found an empty "
                           "variant");
  EXPECT_EQ(err("t1;t1-1"), "--variants: variant 2: expected a variant not given before, found the same as 't1'");
  EXPECT_NE(err("t1,t2").find("variant 1 threads: expected one t item"), std::string::npos);
  EXPECT_NE(err("t1-2-3-4").find("variant 1 threads"), std::string::npos);
  EXPECT_NE(err("simd=scalar/avx2/avx2/avx2").find("variant 1 simd"), std::string::npos);
  EXPECT_NE(err("t999").find("variant 1 threads"), std::string::npos);
}

TEST(MatrixVariants, MissingPathsAreThoseAboveTheCpu) {
  const SimdLevel best = detect_simd();
  const MatrixVariant v = analysis::parse_variants("simd=scalar/avx2/avx512vnni")[0];
  std::vector<std::string> want;
  if (best < SimdLevel::avx2) want.push_back("avx2");
  if (best < SimdLevel::avx512vnni) want.push_back("avx512vnni");
  EXPECT_EQ(v.missing_paths(), want);
}

// stories260K with its own tokenizer, two prompts.
analysis::MatrixModel load_stories(const std::string& path) {
  analysis::MatrixModel m;
  m.model = model::Model::load(path);
  const auto t = tok::Tokenizer::from_gguf(m.model->file());
  m.tokenizer_identity = t->identity();
  m.prompts = {{"english", t->encode("Once upon a time, a little fox", true)},
               {"arabic", t->encode("كان يا ما كان", true)}};
  return m;
}

analysis::MatrixOptions small_options(const std::string& out) {
  analysis::MatrixOptions o;
  o.steps = 4;
  o.threads = 1;
  o.out = out;
  return o;
}

TEST(Matrix, StoriesCellsPassAndTheControlIsDetected) {
  const std::string model = shared_path("models/stories260K.gguf");
  const std::string out = temp_dir("matrix");
  const auto variants = analysis::parse_variants("t1;t2-1,simd=default/scalar/default");
  const analysis::MatrixReport r = analysis::run_matrix({model}, load_stories, variants, small_options(out));
  ASSERT_EQ(r.cells.size(), 4u) << r.table();
  EXPECT_TRUE(r.ok()) << r.table();
  EXPECT_EQ(r.passed(), 4);
  for (const analysis::MatrixCell& c : r.cells) {
    EXPECT_EQ(c.status, "pass") << c.reason;
    EXPECT_TRUE(c.gate.verdict.pass);
    EXPECT_EQ(c.gate.verdict.rows, 4);
    EXPECT_EQ(c.gate.verdict.vocab, 512);
    EXPECT_EQ(c.gate.resume_position, c.prompt_tokens);  // the resume token sits at P
    EXPECT_EQ(c.gate.native_first, c.gate.resume_token);
    EXPECT_TRUE(c.self.exact);
    EXPECT_EQ(c.self.max_abs, 0.0);
    EXPECT_TRUE(c.control.detected);
    EXPECT_EQ(c.control.mismatches_elsewhere, 0u);
    EXPECT_EQ(c.control.mismatches_at_target, c.control.changed_k + c.control.changed_v);
    EXPECT_GT(c.control.logits_max_abs, 0.0);
    EXPECT_EQ(c.architecture, "llama");
    EXPECT_EQ(c.dir, "");  // not kept
  }
  EXPECT_EQ(r.cells[1].simd[1], "scalar");
  EXPECT_EQ(r.cells[1].threads, (std::array<int, 3>{2, 1, 1}));
  const nlohmann::json j = nlohmann::json::parse(r.json());
  EXPECT_EQ(j["kind"], "ember.kv-matrix");
  EXPECT_EQ(j["summary"]["passed"], 4);
  EXPECT_EQ(j["cells"][0]["gate"]["verdict"]["result"], "pass");
  EXPECT_EQ(j["cells"][0]["control"]["operation"], "zero layer 0 head 0 part kv");
  EXPECT_EQ(j["cells"][3]["prompt"], "arabic");
}

TEST(Matrix, VariantsAboveTheCpuAreSkippedAndSaySo) {
  const std::string model = shared_path("models/stories260K.gguf");
  analysis::MatrixOptions o = small_options(temp_dir("matrix-skip"));
  o.simd_ceiling = SimdLevel::scalar;  // as on a CPU with no AVX2
  const analysis::MatrixReport r =
      analysis::run_matrix({model}, load_stories, analysis::parse_variants("t1,simd=scalar;simd=avx2/avx512"), o);
  ASSERT_EQ(r.cells.size(), 4u);
  EXPECT_EQ(r.passed(), 2);
  EXPECT_EQ(r.skipped(), 2);
  EXPECT_TRUE(r.ok());  // skipped cells do not fail the matrix
  EXPECT_EQ(r.cells[1].status, "skipped");
  EXPECT_EQ(r.cells[1].reason, "this CPU has no avx2, avx512 path (best: scalar)");
  EXPECT_NE(r.table().find("skipped: this CPU has no avx2, avx512 path"), std::string::npos) << r.table();
  const nlohmann::json j = nlohmann::json::parse(r.json());
  EXPECT_EQ(j["variants"][1]["missing_paths"], nlohmann::json::parse(R"(["avx2", "avx512"])"));
  EXPECT_TRUE(j["cells"][1]["gate"].is_null());
}

TEST(Matrix, CorruptedCellsFail) {
  const std::string model = shared_path("models/stories260K.gguf");
  const auto variants = analysis::parse_variants("t1");
  analysis::MatrixOptions o = small_options(temp_dir("matrix-bad"));
  // A re-sealed edit of one K element of the last layer: the snapshot is self-consistent, so
  // the import accepts it and only the gate sees the difference (in a replay row).
  int calls = 0;
  o.before_replay = [&](const std::string& dir) {
    if (calls++ != 0) return;
    kv::KvState s = kv::open_state(dir).release();
    s.cache.k_row(4, 1, 2)[3] ^= 0x0400;
    kv::write_state_dir(kv::seal(std::move(s), dir), dir, /*force=*/true);
  };
  analysis::MatrixReport r = analysis::run_matrix({model}, load_stories, variants, o);
  ASSERT_EQ(r.cells.size(), 2u);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.cells[0].status, "fail");
  ASSERT_TRUE(r.cells[0].gate.verdict.first_mismatch);
  EXPECT_EQ(r.cells[0].gate.verdict.first_mismatch->source, "replay");
  EXPECT_NE(r.cells[0].reason.find("gate: "), std::string::npos) << r.cells[0].reason;
  EXPECT_EQ(r.cells[1].status, "pass") << r.cells[1].reason;
  EXPECT_NE(r.table().find("fail: stories260K / english / t1: gate: "), std::string::npos) << r.table();

  // An edit left unsealed (a payload bit flipped on disk): refused by the reader, an error cell
  // naming the hash.
  o.before_replay = [](const std::string& dir) {
    std::fstream f(dir + "/values.f16le", std::ios::in | std::ios::out | std::ios::binary);
    char b = 0;
    f.read(&b, 1);
    b ^= 1;
    f.seekp(0);
    f.write(&b, 1);
  };
  r = analysis::run_matrix({model}, load_stories, variants, o);
  EXPECT_EQ(r.errors(), 2);
  EXPECT_NE(r.cells[0].reason.find("proof.blocks["), std::string::npos) << r.cells[0].reason;  // the bad block
  EXPECT_FALSE(std::filesystem::exists(o.out + "/cells/1-1-1"));  // not kept: an error cell leaves nothing

  // A model that does not load: one error cell with the loader's line, the rest still runs.
  o.before_replay = nullptr;
  const auto loader = [](const std::string& path) -> analysis::MatrixModel {
    if (path == "missing.gguf") fail("missing.gguf", "cannot open");
    return load_stories(path);
  };
  r = analysis::run_matrix({"missing.gguf", model}, loader, variants, o);
  ASSERT_EQ(r.cells.size(), 3u);
  EXPECT_EQ(r.cells[0].status, "error");
  EXPECT_EQ(r.cells[0].prompt_id, "*");
  EXPECT_EQ(r.cells[0].reason, "missing.gguf: cannot open");
  EXPECT_EQ(r.passed(), 2);
}

}  // namespace
}  // namespace ember::test
