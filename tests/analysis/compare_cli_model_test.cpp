// `ember kv compare --model` end to end: native snapshots of stories260K written from an
// engine prefill (the manifest a native export would write), then the CLI diagnostics.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "kv/state.h"
#include "model/engine.h"
#include "model/generate.h"
#include "support/cli_run.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"
#include "util/atomic_file.h"

namespace ember::analysis {
namespace {

using nlohmann::json;

using test::CliRun;
using test::parse_report;
using test::q;
using test::run_ember;

// A native snapshot of `prompt` (token ids) under `gguf`, written to a fresh directory.
std::string native_snapshot(const std::string& gguf, const std::vector<int32_t>& prompt) {
  const auto m = model::Model::load(gguf);
  model::Engine engine(m, model::EngineOptions{1});
  const model::ModelConfig& c = engine.config();
  kv::KvState s;
  s.cache = engine.new_cache(int(prompt.size()));
  const std::vector<float> logits = engine.forward(s.cache, prompt);
  kv::SnapshotManifest& man = s.manifest;
  man.producer = "ember test";
  man.model = {m->identity(), model::arch_name(c.arch), c.n_vocab, c.n_embd, c.n_heads};
  man.tokenizer.identity = tok::Tokenizer::from_gguf(m->file())->identity();
  man.geometry = {c.n_layers, c.n_kv_heads, c.head_dim, int(prompt.size())};
  man.rope.layout = model::rope_layout_name(c.rope_layout);
  man.rope.theta = c.rope_theta;
  man.attention.qk_norm = c.qk_norm ? kv::kQkNormRmsPerHead : kv::kQkNormNone;
  man.attention.qkv_bias = c.qkv_bias;
  man.numerics.contract = model::kNumericsContract;
  man.numerics.engine_fingerprint = engine.fingerprint();
  man.prefix.tokens = prompt;
  man.resume.token = model::argmax(logits.data(), int(logits.size()));
  man.resume.position = int64_t(prompt.size());
  const std::string dir = test::temp_dir("native") + "/snap";
  kv::write_state_dir(kv::seal(std::move(s), dir), dir, false);
  return dir;
}

const std::vector<int32_t> kPrompt = {1, 403, 407, 261, 378};  // BOS + a short story opening

TEST(CompareCliModel, SelfZeroAndScaleOneOnStories) {
  const std::string model = test::shared_path("models/stories260K.gguf");
  const std::string a = native_snapshot(model, kPrompt);
  const std::string b = native_snapshot(model, kPrompt);
  // Self: exact everywhere, top-1 agreement on every step, identical greedy sequences.
  CliRun r = run_ember("kv compare --json --max-abs 0 " + q(a) + " " + q(b) + " --model " + q(model) +
                       " --steps 5");
  ASSERT_EQ(r.rc, 0) << r.out;
  json rep = parse_report(r);
  EXPECT_TRUE(rep["summary"]["identical"].get<bool>());
  EXPECT_EQ(rep["diagnostics"]["same_input"]["top1_agreement"], 5);
  EXPECT_TRUE(rep["diagnostics"]["independent_greedy"]["identical"].get<bool>());
  for (const json& s : rep["diagnostics"]["same_input"]["steps"]) {
    EXPECT_EQ(s["logits"]["max_abs"], 0.0);
    for (const json& l : s["attn_out"]) EXPECT_EQ(l["max_abs"], 0.0);
  }
  // Zero K and V of layer 0, head 0: localized, and visible in attention output and logits.
  const std::string dir = test::temp_dir("receipts");
  ASSERT_EQ(run_ember("kv perturb --snapshot " + q(a) + " --layer 0 --head 0 --part kv --zero --receipt " +
                      q(dir + "/z.json")).rc, 0);
  r = run_ember("kv compare --json --max-abs 0 " + q(a) + " " + q(a) + " --perturb " + q(dir + "/z.json") +
                " --model " + q(model) + " --steps 4 --html " + q(dir + "/z.html"));
  EXPECT_EQ(r.rc, 1) << r.out;
  rep = parse_report(r);
  for (const json& h : rep["heads"]) {
    const bool hit = h["layer"] == 0 && h["head"] == 0;
    EXPECT_EQ(h["k"]["mismatches"].get<int>() > 0, hit);
    EXPECT_EQ(h["v"]["mismatches"].get<int>() > 0, hit);
  }
  EXPECT_EQ(rep["first_exceedance"]["layer"], 0);
  EXPECT_EQ(rep["first_exceedance"]["head"], 0);
  const json& s0 = rep["diagnostics"]["same_input"]["steps"][0];
  EXPECT_LT(s0["attn_out"][0]["cosine"].get<double>(), 1.0);
  EXPECT_LT(s0["logits"]["cosine"].get<double>(), 1.0);
  std::string out;
  ASSERT_EQ(test::run_command("/usr/bin/python3 " + std::string(EMBER_SOURCE_DIR) +
                                  "/tests/analysis/report_html_check.py " + q(dir + "/z.html"), &out), 0);
  const json c = json::parse(out);
  EXPECT_TRUE(c["problems"].empty()) << out;
  EXPECT_EQ(c["unique_cells"]["k.cosine"], 20);  // 5 layers x 4 KV heads
  EXPECT_EQ(c["attn_cells"], 20);                // 4 steps x 5 layers
  // Scale 1.0: nothing changes, bit for bit, down to the logits.
  ASSERT_EQ(run_ember("kv perturb --snapshot " + q(a) + " --layer 0 --head 0 --part kv --scale 1 --receipt " +
                      q(dir + "/one.json")).rc, 0);
  r = run_ember("kv compare --json --max-abs 0 " + q(a) + " " + q(a) + " --perturb " + q(dir + "/one.json") +
                " --model " + q(model) + " --steps 3");
  ASSERT_EQ(r.rc, 0) << r.out;
  rep = parse_report(r);
  for (const json& s : rep["diagnostics"]["same_input"]["steps"]) EXPECT_EQ(s["logits"]["max_abs"], 0.0);
}

TEST(CompareCliModel, ZeroingLayer0Head0OnASynthesizedQwen2) {
  const std::string dir = test::temp_dir("synth");
  const std::string model = dir + "/qwen2.gguf";
  const CliRun s = run_ember("model synth --arch qwen2 --layers 3 --hidden 64 --heads 4 --kv-heads 2 "
                             "--ffn 128 --vocab 512 --qkv-bias --tied --type f32 --seed 11 -o " + q(model));
  ASSERT_EQ(s.rc, 0) << s.out;
  const std::string a = native_snapshot(model, kPrompt);
  ASSERT_EQ(run_ember("kv perturb --snapshot " + q(a) + " --layer 0 --head 0 --part kv --zero --receipt " +
                      q(dir + "/z.json")).rc, 0);
  const CliRun r = run_ember("kv compare --json " + q(a) + " " + q(a) + " --perturb " + q(dir + "/z.json") +
                             " --model " + q(model) + " --steps 3");
  ASSERT_EQ(r.rc, 0) << r.out;
  const json rep = parse_report(r);
  for (const json& h : rep["heads"]) {
    const bool hit = h["layer"] == 0 && h["head"] == 0;
    EXPECT_EQ(h["k"]["mismatches"].get<int>() > 0, hit) << h.dump();
    EXPECT_EQ(h["v"]["mismatches"].get<int>() > 0, hit) << h.dump();
  }
  const json& s0 = rep["diagnostics"]["same_input"]["steps"][0];
  EXPECT_LT(s0["attn_out"][0]["cosine"].get<double>(), 1.0);
  EXPECT_LT(s0["logits"]["cosine"].get<double>(), 1.0);
  std::printf("[synth qwen2] zero L0 H0 kv: layer-0 attn-out cosine %.6f, logit cosine %.6f\n",
              s0["attn_out"][0]["cosine"].get<double>(), s0["logits"]["cosine"].get<double>());
}

TEST(CompareCliModel, F32AgainstQ8IsAQuantizationBoundaryStudy) {
  const std::string f32 = test::shared_path("models/stories260K.gguf");
  const std::string q8 = test::shared_path("models/stories260K-Q8_0.gguf");
  const std::string a = native_snapshot(f32, kPrompt);
  const std::string b = native_snapshot(q8, kPrompt);
  const CliRun r = run_ember("kv compare --json --r2 " + q(a) + " " + q(b) + " --model " + q(f32) + " --steps 3");
  ASSERT_EQ(r.rc, 0) << r.out;
  const json rep = parse_report(r);
  EXPECT_TRUE(rep["crossing"]["crosses_models"].get<bool>());
  EXPECT_EQ(rep["crossing"]["label"], "quantization-boundary");
  EXPECT_NE(rep["left"]["model_identity"], rep["right"]["model_identity"]);
  EXPECT_FALSE(rep["summary"]["identical"].get<bool>());
  EXPECT_TRUE(rep["diagnostics"].is_object());
  // The diagnostics need LEFT's own model: the Q8_0 snapshot is not native to the F32 file.
  const CliRun refused = run_ember("kv compare " + q(b) + " " + q(a) + " --model " + q(f32) + " --steps 2");
  EXPECT_EQ(refused.rc, 2) << refused.out;
  EXPECT_NE(refused.out.find("kv compare LEFT: model.identity"), std::string::npos) << refused.out;
}

}  // namespace
}  // namespace ember::analysis
