// The model check on every shared llama.cpp fixture (../shared/models/llamacpp-state/README.md):
// each file with the GGUF that computed it (accepted) and with the other GGUFs of its geometry
// (another fine-tune, another weight quantization: refused). Prints the pooled error of the
// import's sampled positions and the distribution of per-row errors over every position: the
// figures docs/formats/llamacpp-state.md quotes for the bounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "kv/foreign_check.h"
#include "kv/foreign_pairings.h"
#include "kv/llamacpp_import.h"
#include "kv/llamacpp_state.h"
#include "kv/recompute_rows.h"
#include "model/engine.h"
#include "support/test_support.h"
#include "util/mapped_file.h"

namespace ember::kv::foreign_check_test {

using foreign_pairings::kPairings;
using foreign_pairings::Pairing;

struct Checked {
  ModelCheck sampled, all;
};

Checked check_pairing(const Pairing& p) {
  const auto m = model::Model::load(test::shared_path(std::string("models/") + p.model));
  model::Engine engine(m, {1});
  const model::ModelConfig& cfg = engine.config();
  const auto file = MappedFile::open(test::shared_path(std::string("models/llamacpp-state/") + p.file + ".seq"));
  const LlamaCppState st = parse_llamacpp_state(
      {file->data(), file->size()},
      {cfg.n_layers, cfg.n_kv_heads, cfg.head_dim, cfg.n_ctx, cfg.n_vocab, true}, p.file);
  const StoredRowType k{st.type_k, st.rot_k}, v{st.type_v, st.rot_v};
  const int P = st.cache.n_pos;
  Checked c;
  const std::vector<int> spot = spot_positions(P, kModelCheckPositions, kModelCheckSeed);
  c.sampled = check_foreign_rows(engine, st.cache, st.tokens, k, v, spot);
  std::vector<int> every(static_cast<size_t>(P));
  for (int i = 0; i < P; ++i) every[size_t(i)] = i;
  c.all = check_foreign_rows(engine, st.cache, st.tokens, k, v, every);
  return c;
}

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(q * double(v.size())))];
}

TEST(ForeignCheckFixtures, RightPairingsPassWrongOnesAreRefused) {
  int right = 0, wrong = 0;
  for (const Pairing& p : kPairings) {
    SCOPED_TRACE(std::string(p.file) + " with " + p.model);
    const Checked c = check_pairing(p);
    std::vector<double> rows;
    for (const PartCheck* part : {&c.all.k, &c.all.v})
      for (const RowError& r : part->rows) rows.push_back(r.error);
    std::printf("  %-5s %-31s %-37s k=4: L0 K %.3g V %.3g all K %.3g V %.3g | every position: L0 K %.3g V %.3g "
                "all K %.3g V %.3g | rows p50 %.3g p90 %.3g p99 %.3g max %.3g\n",
                p.right ? "RIGHT" : "wrong", p.file, p.model, c.sampled.k.layer0.error, c.sampled.v.layer0.error,
                c.sampled.k.all.error, c.sampled.v.all.error, c.all.k.layer0.error, c.all.v.layer0.error,
                c.all.k.all.error, c.all.v.all.error, percentile(rows, 0.5), percentile(rows, 0.9),
                percentile(rows, 0.99), percentile(rows, 1.0));
    EXPECT_EQ(c.sampled.ok(), p.right);
    EXPECT_EQ(c.all.ok(), p.right);
    if (!p.right) {  // and the importer refuses it, by name
      const auto m = model::Model::load(test::shared_path(std::string("models/") + p.model));
      model::Engine engine(m, {1});
      const auto file = MappedFile::open(test::shared_path(std::string("models/llamacpp-state/") + p.file + ".seq"));
      const std::string e = test::error_of([&] {
        import_llamacpp({file->data(), file->size()}, engine, "tok", {}, p.file);
      });
      EXPECT_NE(e.find(std::string(p.file) + ": model check: expected "), std::string::npos) << e;
      EXPECT_NE(e.find(", worst at layer "), std::string::npos) << e;
    }
    (p.right ? right : wrong) += 1;
  }
  EXPECT_EQ(right, 21);
}

// The two imports issue 31 opens with: the stories260K state with the fine-tune and with the
// Q8_0 file. Both exit 2 with one line naming the statistic, layer, head and position.
TEST(ForeignCheckFixtures, TheIssuesTwoImportsAreRefusedByName) {
  const std::string seq = test::shared_path("models/llamacpp-state/stories260K.p1.f16.fa0.seq");
  const std::string out = test::temp_dir("fc-issue31");
  const struct {
    const char* model;
    const char* says;
  } cases[] = {
      {"stories260K-kjv-top.gguf", "model check: expected keys of every layer within 0.04"},
      {"stories260K-Q8_0.gguf", "model check: expected keys of layer 0 within 5e-05"},
  };
  for (const auto& c : cases) {
    std::string text;
    const int rc = test::run_command(test::ember_binary() + " kv import-llamacpp " + seq + " --model " +
                                         test::shared_path(std::string("models/") + c.model) + " -o " + out +
                                         "/" + c.model,
                                     &text);
    EXPECT_EQ(rc, 2) << text;
    EXPECT_NE(text.find(c.says), std::string::npos) << text;
    EXPECT_NE(text.find("worst at layer "), std::string::npos) << text;
    EXPECT_FALSE(std::filesystem::exists(out + "/" + c.model));
  }
  // The right model is accepted, and the manifest's producer records the check.
  std::string text;
  EXPECT_EQ(test::run_command(test::ember_binary() + " kv import-llamacpp " + seq + " --model " +
                                  test::shared_path("models/stories260K.gguf") + " -o " + out + "/right",
                              &text),
            0)
      << text;
  EXPECT_NE(text.find("model check passed (4 positions): keys 0 at layer 0"), std::string::npos) << text;
  // --no-model-check imports the wrong pairing and says so in the manifest.
  EXPECT_EQ(test::run_command(test::ember_binary() + " kv import-llamacpp " + seq + " --model " +
                                  test::shared_path("models/stories260K-Q8_0.gguf") + " --no-model-check -o " +
                                  out + "/skipped",
                              &text),
            0)
      << text;
  const auto manifest = test::read_bytes(out + "/skipped/manifest.json");
  EXPECT_NE(std::string(manifest.begin(), manifest.end()).find("model check skipped"), std::string::npos);
}

}  // namespace ember::kv::foreign_check_test
