// Streaming calibration on the real stories260K pair (stories260K -> stories260K-kjv-top, s = 2):
// the statistics collect_calibration folds prompt by prompt give the same maps as a direct
// solve over every stored row (the old row-storing path, kept here as the reference) to 1e-9
// relative, and the same mapper bits whatever the thread count of the engines, of the
// accumulation and of the fit.
#include <gtest/gtest.h>

#include <Eigen/Dense>

#include <cmath>
#include <fstream>
#include <map>

#include "map/collect.h"
#include "map/mapper.h"
#include "model/engine.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"

namespace ember::map {
namespace {

struct StoriesPair {
  std::shared_ptr<const model::Model> source = model::Model::load(test::shared_path("models/stories260K.gguf"));
  std::shared_ptr<const model::Model> target = model::Model::load(test::shared_path("models/stories260K-kjv-top.gguf"));
  std::unique_ptr<tok::Tokenizer> tokenizer = tok::Tokenizer::from_gguf(target->file());
  std::vector<std::vector<int32_t>> prompts;
  PromptSplit split;
  StoriesPair() {
    std::ifstream in(test::shared_path("models/prompts-stories-kjv.txt"));
    std::string line;
    std::vector<std::string> hashes;
    while (std::getline(in, line) && prompts.size() < 20)
      if (!line.empty()) {
        prompts.push_back(tokenizer->encode(line, true));
        hashes.push_back(prompt_hash(prompts.back()));
      }
    split = PromptSplit::make(hashes, 12, 6, 5);
  }
  CalibrationSet collect(int engine_threads, int accumulate_threads) const {
    model::Engine se(source, {engine_threads}), te(target, {engine_threads});
    CollectOptions co;
    co.threads = accumulate_threads;
    return collect_calibration(se, source->identity(), te, target->identity(), prompts, split,
                               tokenizer->identity(), 2, co);
  }
};

TEST(CalibStream, StatisticsFitEqualsTheDirectSolveOfAllRows) {
  StoriesPair su;
  const CalibrationSet set = su.collect(1, 1);
  EXPECT_EQ(set.n_prompts(SplitPart::calib), 12u);
  EXPECT_EQ(set.n_prompts(SplitPart::eval), 6u);
  MapperOptions o;
  o.relation = "same-base";
  o.kind = MapperKind::ridge;
  o.lambda = 1e-2;
  o.residual_maps = true;
  const Mapper m = fit_mapper(set, o);

  // The old path: every row stored, then one solve. Layer 4 head 1's V map and the residual
  // map at boundary 4.
  model::Engine se(su.source, {1}), te(su.target, {1});
  const model::ModelConfig& c = su.target->config();
  const int D = c.head_dim, E = c.n_embd, G = c.n_kv_heads, l = 4, h = 1, b = 4;
  std::vector<std::vector<double>> kx, ky, rx, ry;  // rows, per problem
  std::map<std::string, const std::vector<int32_t>*> by_hash;
  for (const auto& p : su.prompts) by_hash[prompt_hash(p)] = &p;
  for (const auto& hash : su.split.calib) {
    const ModelRows s = capture_rows(se, *by_hash.at(hash)), t = capture_rows(te, *by_hash.at(hash));
    for (int r = 0; r < s.n_rows; ++r) {
      const size_t at = ((size_t(l) * G + h) * s.n_rows + r) * D;
      kx.emplace_back(s.v.begin() + long(at), s.v.begin() + long(at + D));
      ky.emplace_back(t.v.begin() + long(at), t.v.begin() + long(at + D));
      const size_t ra = (size_t(b) * s.n_rows + r) * E;
      rx.emplace_back(s.res.begin() + long(ra), s.res.begin() + long(ra + E));
      ry.emplace_back(t.res.begin() + long(ra), t.res.begin() + long(ra + E));
    }
  }
  const auto check = [&](const std::vector<std::vector<double>>& xs, const std::vector<std::vector<double>>& ys,
                         const LinearMap& got) {
    const int d_in = int(xs[0].size()), d_out = int(ys[0].size());
    Eigen::MatrixXd X(long(xs.size()), d_in), Y(long(ys.size()), d_out);
    for (size_t r = 0; r < xs.size(); ++r) {
      for (int i = 0; i < d_in; ++i) X(long(r), i) = xs[r][size_t(i)];
      for (int j = 0; j < d_out; ++j) Y(long(r), j) = ys[r][size_t(j)];
    }
    Eigen::MatrixXd A = X.transpose() * X;
    A.diagonal().array() += o.lambda;
    const Eigen::MatrixXd W = A.ldlt().solve(X.transpose() * Y);
    double diff = 0, norm = 0;
    for (int i = 0; i < d_in; ++i)
      for (int j = 0; j < d_out; ++j) {
        const double e = got.w[size_t(i) * d_out + j] - W(i, j);
        diff += e * e;
        norm += W(i, j) * W(i, j);
      }
    EXPECT_LT(std::sqrt(diff / norm), 1e-9);
    for (double v : got.b) EXPECT_EQ(v, 0.0);  // plain ridge: no bias
  };
  check(kx, ky, m.head(l, h).v);
  ASSERT_NE(m.residual_at(b), nullptr);
  check(rx, ry, m.residual_at(b)->map);
  EXPECT_EQ(m.calib_rows, int64_t(kx.size()));
  // Shared layers: the target's K equals the source's, R² = 1 up to the penalty's shrinkage.
  EXPECT_GT(m.head(0, 0).k_r2_eval, 1 - 1e-6) << m.head(0, 0).k_r2_eval;
  EXPECT_LE(m.head(0, 0).k_r2_eval, 1.0);
  EXPECT_LT(m.head(4, 0).k_r2_eval, 1.0);

  // The same mapper bits with 2 engine threads, 3 accumulation threads and a 4-thread fit.
  const CalibrationSet other = su.collect(2, 3);
  o.threads = 4;
  const Mapper again = fit_mapper(other, o);
  EXPECT_EQ(again.hash(), m.hash());
  EXPECT_EQ(again.residual_at(b)->map.w, m.residual_at(b)->map.w);
}

}  // namespace
}  // namespace ember::map
