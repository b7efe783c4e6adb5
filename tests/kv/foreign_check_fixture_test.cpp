// The model check on every shared llama.cpp fixture (../shared/models/llamacpp-state/README.md):
// each file with the GGUF that computed it (accepted) and with the other GGUFs of its geometry
// (another fine-tune, another weight quantization: refused). Prints the pooled error of the
// import's sampled positions and the distribution of per-row errors over every position: the
// figures docs/formats/llamacpp-state.md quotes for the bounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "kv/foreign_check.h"
#include "kv/llamacpp_state.h"
#include "kv/recompute_rows.h"
#include "model/engine.h"
#include "support/test_support.h"
#include "util/mapped_file.h"

namespace ember::kv::foreign_check_test {

struct Pairing {
  const char* file;   // NAME of NAME.seq
  const char* model;  // under ../shared/models
  bool right;         // the GGUF that computed the file
};

#define STORIES_WRONG(NAME, ...)                                                   \
  {NAME, "stories260K-kjv-top.gguf", false}, {NAME, "stories260K-Q8_0.gguf", false}, \
      {NAME, "stories260K-Q4_0.gguf", false}, {NAME, "stories260K-Q4_K_M.gguf", false}, \
      {NAME, "stories260K-F16.gguf", false}, {NAME, "stories260K-kjv-top-Q8_0.gguf", false}

const Pairing kPairings[] = {
    // Right pairings: all 21 files.
    {"stories260K.p1.f16.fa0", "stories260K.gguf", true},
    {"stories260K.p2.f16.fa0", "stories260K.gguf", true},
    {"stories260K.p2.f16.fa1", "stories260K.gguf", true},
    {"stories260K-Q8_0.p2.f16.fa0", "stories260K-Q8_0.gguf", true},
    {"stories260K-kjv-top.p2.f16.fa0", "stories260K-kjv-top.gguf", true},
    {"llama-gqa-s5005.F32.f16.fa0", "synthetic/llama-gqa-s5005.F32.gguf", true},
    {"llama-gqa-s5005.F32.f16.fa1", "synthetic/llama-gqa-s5005.F32.gguf", true},
    {"llama-gqa-s5005.F32.q8_0.fa1", "synthetic/llama-gqa-s5005.F32.gguf", true},
    {"llama-gqa-s5005.F32.q4_0.fa1", "synthetic/llama-gqa-s5005.F32.gguf", true},
    {"llama-gqa-s5005.Q6_K.f16.fa0", "synthetic/llama-gqa-s5005.Q6_K.gguf", true},
    {"llama-gqa-s5005.Q6_K.f16.fa1", "synthetic/llama-gqa-s5005.Q6_K.gguf", true},
    {"llama-gqa-s5005.Q6_K.q8_0.fa1", "synthetic/llama-gqa-s5005.Q6_K.gguf", true},
    {"llama-gqa-s5005.Q6_K.q4_0.fa1", "synthetic/llama-gqa-s5005.Q6_K.gguf", true},
    {"qwen2-bias-s5006.F32.f16.fa0", "synthetic/qwen2-bias-s5006.F32.gguf", true},
    {"qwen2-bias-s5006.F32.q8_0.fa1", "synthetic/qwen2-bias-s5006.F32.gguf", true},
    {"qwen2-bias-s5006.F32.q8_0k.fa0", "synthetic/qwen2-bias-s5006.F32.gguf", true},
    {"qwen2-bias-s5006.F32.q4_0.fa1", "synthetic/qwen2-bias-s5006.F32.gguf", true},
    {"qwen2-bias-s5006.Q8_0.f16.fa0", "synthetic/qwen2-bias-s5006.Q8_0.gguf", true},
    {"qwen2-bias-s5006.Q8_0.q8_0.fa1", "synthetic/qwen2-bias-s5006.Q8_0.gguf", true},
    {"qwen2-bias-s5006.Q8_0.q8_0k.fa0", "synthetic/qwen2-bias-s5006.Q8_0.gguf", true},
    {"qwen2-bias-s5006.Q8_0.q4_0.fa1", "synthetic/qwen2-bias-s5006.Q8_0.gguf", true},
    // Wrong pairings: every other GGUF of the file's geometry.
    STORIES_WRONG("stories260K.p1.f16.fa0"),
    STORIES_WRONG("stories260K.p2.f16.fa0"),
    STORIES_WRONG("stories260K.p2.f16.fa1"),
    {"stories260K-Q8_0.p2.f16.fa0", "stories260K.gguf", false},
    {"stories260K-Q8_0.p2.f16.fa0", "stories260K-kjv-top-Q8_0.gguf", false},
    {"stories260K-Q8_0.p2.f16.fa0", "stories260K-F16.gguf", false},
    {"stories260K-kjv-top.p2.f16.fa0", "stories260K.gguf", false},
    {"stories260K-kjv-top.p2.f16.fa0", "stories260K-kjv-top-Q8_0.gguf", false},
    {"llama-gqa-s5005.F32.f16.fa0", "synthetic/llama-gqa-s5005.Q6_K.gguf", false},
    {"llama-gqa-s5005.F32.f16.fa1", "synthetic/llama-gqa-s5005.Q6_K.gguf", false},
    {"llama-gqa-s5005.F32.q8_0.fa1", "synthetic/llama-gqa-s5005.Q6_K.gguf", false},
    {"llama-gqa-s5005.F32.q4_0.fa1", "synthetic/llama-gqa-s5005.Q6_K.gguf", false},
    {"llama-gqa-s5005.F32.f16.fa0", "synthetic/llama-gqa-s5005.Q5_K_M.gguf", false},
    {"llama-gqa-s5005.F32.q4_0.fa1", "synthetic/llama-gqa-s5005.Q4_K_M.gguf", false},
    {"llama-gqa-s5005.Q6_K.f16.fa0", "synthetic/llama-gqa-s5005.F32.gguf", false},
    {"llama-gqa-s5005.Q6_K.f16.fa1", "synthetic/llama-gqa-s5005.F32.gguf", false},
    {"llama-gqa-s5005.Q6_K.q8_0.fa1", "synthetic/llama-gqa-s5005.F32.gguf", false},
    {"llama-gqa-s5005.Q6_K.q4_0.fa1", "synthetic/llama-gqa-s5005.F32.gguf", false},
    {"llama-gqa-s5005.Q6_K.q4_0.fa1", "synthetic/llama-gqa-s5005.Q5_K_M.gguf", false},
    {"qwen2-bias-s5006.F32.f16.fa0", "synthetic/qwen2-bias-s5006.Q8_0.gguf", false},
    {"qwen2-bias-s5006.F32.q8_0.fa1", "synthetic/qwen2-bias-s5006.Q8_0.gguf", false},
    {"qwen2-bias-s5006.F32.q8_0k.fa0", "synthetic/qwen2-bias-s5006.Q8_0.gguf", false},
    {"qwen2-bias-s5006.F32.q4_0.fa1", "synthetic/qwen2-bias-s5006.Q8_0.gguf", false},
    {"qwen2-bias-s5006.F32.q4_0.fa1", "synthetic/qwen2-bias-s5006.Q4_K_M.gguf", false},
    {"qwen2-bias-s5006.Q8_0.f16.fa0", "synthetic/qwen2-bias-s5006.F32.gguf", false},
    {"qwen2-bias-s5006.Q8_0.q8_0.fa1", "synthetic/qwen2-bias-s5006.F32.gguf", false},
    {"qwen2-bias-s5006.Q8_0.q8_0k.fa0", "synthetic/qwen2-bias-s5006.F32.gguf", false},
    {"qwen2-bias-s5006.Q8_0.q4_0.fa1", "synthetic/qwen2-bias-s5006.F32.gguf", false},
    {"qwen2-bias-s5006.Q8_0.q4_0.fa1", "synthetic/qwen2-bias-s5006.Q4_K_M.gguf", false},
};

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
    (p.right ? right : wrong) += 1;
  }
  EXPECT_EQ(right, 21);
}

}  // namespace ember::kv::foreign_check_test
