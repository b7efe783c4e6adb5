// `model synth --outliers`: the spec's grammar and its errors, the bytes (the same command
// writes the same file), the metadata `model inspect` shows, the identity, and that only the
// tensors the construction names change. What the engine then sees: tests/model/synth_outliers_test.cpp.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "gguf/gguf_file.h"
#include "gguf/identity.h"
#include "gguf/synth.h"
#include "gguf_fixture.h"
#include "support/test_support.h"
#include "util/error.h"

namespace ember::gguf::outliers_test {
namespace {

SynthSpec geometry(const std::string& outliers) {
  SynthSpec s;
  s.arch = "qwen2";
  s.layers = 2, s.hidden = 128, s.heads = 2, s.kv_heads = 1, s.ffn = 192, s.vocab = 300, s.seed = 7;
  s.qkv_bias = true;
  if (!outliers.empty()) s.outliers = OutlierSpec::parse(outliers);
  return s;
}

GgufFile model(const SynthSpec& s) { return fixture::parse_bytes(fixture::to_bytes(synth_model(s))); }

TEST(SynthOutliers, TheSpecParsesToOneCanonicalSpelling) {
  EXPECT_EQ(OutlierSpec::parse("pairs=2,scale=20").text(), "pairs=2,scale=20");
  EXPECT_EQ(OutlierSpec::parse("sink=8,scale=20.0,pairs=02").text(), "pairs=2,scale=20,sink=8");
  EXPECT_EQ(OutlierSpec::parse("sink=4.5").text(), "sink=4.5");
  EXPECT_EQ(OutlierSpec::parse("pairs=1,scale=1e2,sink=0").text(), "pairs=1,scale=100");
  const OutlierSpec s = OutlierSpec::parse("pairs=3,scale=12,sink=6");
  EXPECT_EQ(s.pairs, 3);
  EXPECT_EQ(s.scale, 12.0);
  EXPECT_EQ(s.sink, 6.0);
}

TEST(SynthOutliers, ABadSpecIsOneLineNamingTheFlagAndWhatWasExpected) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "--outliers: expected comma-separated pairs=N, scale=S, sink=G, found ''"},
      {"pairs=2,scale=20,", "expected comma-separated pairs=N, scale=S, sink=G, found '' in"},
      {"channels=4", "expected comma-separated pairs=N, scale=S, sink=G, found 'channels=4'"},
      {"pairs=2,pairs=3,scale=2", "expected each key once, found 'pairs' twice"},
      {"pairs=0,scale=2", "expected pairs=N with N an integer in 1..1024, found 'pairs=0'"},
      {"pairs=-1,scale=2", "expected pairs=N with N an integer in 1..1024"},
      {"pairs=2.5,scale=2", "expected pairs=N with N an integer in 1..1024"},
      {"pairs=2,scale=1", "expected scale=S with S a finite number > 1 and <= 1e6, found 'scale=1'"},
      {"pairs=2,scale=nan", "expected scale=S with S a finite number > 1"},
      {"pairs=2,scale=20x", "expected scale=S with S a finite number > 1"},
      {"sink=-1", "expected sink=G with G a finite number in [0, 100] (nats), found 'sink=-1'"},
      {"sink=inf", "expected sink=G with G a finite number in [0, 100]"},
      {"pairs=2", "expected scale=S beside pairs=N"},
      {"scale=20", "expected pairs=N beside scale=S"},
      {"sink=0", "expected pairs=N,scale=S and/or sink=G with G > 0, found 'sink=0'"},
  };
  for (const auto& [spec, message] : cases) {
    const std::string e = test::error_of([&] { OutlierSpec::parse(spec); });
    EXPECT_EQ(e.rfind("synth: --outliers: expected ", 0), 0u) << spec << ": " << e;
    EXPECT_NE(e.find(message), std::string::npos) << spec << ": " << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  // The geometry's limits: the lowest-frequency pair is the sink's; a per-head Q/K norm.
  EXPECT_NE(test::error_of([] { synth_model(geometry("pairs=32,scale=2")); })
                .find("--outliers: expected pairs <= head_dim/2 - 1 = 31 (the lowest-frequency pair is the sink's), "
                      "found pairs=32"),
            std::string::npos);
  SynthSpec llama = geometry("sink=4");
  llama.arch = "llama", llama.qkv_bias = false;
  EXPECT_NE(test::error_of([&] { synth_model(llama); })
                .find("--outliers: expected sink=G with Q/K biases (qwen2, or llama with --qkv-bias), found no biases"),
            std::string::npos);
  SynthSpec q3 = geometry("pairs=2,scale=4");
  q3.arch = "qwen3", q3.qkv_bias = false, q3.qk_norm = true;
  EXPECT_NE(test::error_of([&] { synth_model(q3); }).find("--outliers: expected an architecture without per-head Q/K norm"),
            std::string::npos);
}

// Outliers alone touch attn_q and attn_k (K pairs times the scale, their Q rows divided by
// it); the sink touches the embedding, the norms before attention and every matrix that
// reads or writes the residual, and nothing else. The identity covers both through the bytes.
TEST(SynthOutliers, OnlyTheNamedTensorsChangeAndTheIdentityFollows) {
  const GgufFile plain = model(geometry(""));
  const GgufFile outl = model(geometry("pairs=2,scale=20"));
  const GgufFile sink = model(geometry("pairs=2,scale=20,sink=8"));
  EXPECT_FALSE(plain.has("ember.synth.outliers"));
  EXPECT_EQ(outl.get_string("ember.synth.outliers"), "pairs=2,scale=20");
  EXPECT_EQ(sink.get_string("ember.synth.outliers"), "pairs=2,scale=20,sink=8");
  auto changed = [&](const GgufFile& f) {
    std::vector<std::string> names;
    for (const TensorInfo& t : f.tensors())
      if (tensor_hash(t) != tensor_hash(*plain.find_tensor(t.name))) names.push_back(t.name);
    return names;
  };
  EXPECT_EQ(changed(outl), (std::vector<std::string>{"blk.0.attn_q.weight", "blk.0.attn_q.bias", "blk.0.attn_k.weight",
                                                      "blk.0.attn_k.bias", "blk.1.attn_q.weight", "blk.1.attn_q.bias",
                                                      "blk.1.attn_k.weight", "blk.1.attn_k.bias"}));
  std::vector<std::string> with_sink = changed(sink);
  for (const char* kept : {"output_norm.weight", "blk.0.ffn_norm.weight", "blk.1.attn_v.bias"})
    EXPECT_EQ(std::count(with_sink.begin(), with_sink.end(), kept), 0) << kept;
  EXPECT_EQ(with_sink.size(), 1u + 2 * 10u + 1u);  // embedding, 10 per block, output.weight
  const std::string a = model_identity(plain).hex(), b = model_identity(outl).hex(), c = model_identity(sink).hex();
  EXPECT_NE(a, b);
  EXPECT_NE(b, c);
  EXPECT_NE(a, c);
  // The K outlier rows are exactly the plain rows times the scale (F32 weights).
  const TensorInfo& kp = *plain.find_tensor("blk.0.attn_k.weight");
  const TensorInfo& ko = *outl.find_tensor("blk.0.attn_k.weight");
  const float* xp = reinterpret_cast<const float*>(kp.data);
  const float* xo = reinterpret_cast<const float*>(ko.data);
  int scaled_rows = 0;
  for (int r = 0; r < 64; ++r) {
    const bool scaled = xo[r * 128] != xp[r * 128];
    scaled_rows += scaled;
    for (int i = 0; i < 128; ++i) EXPECT_EQ(xo[r * 128 + i], scaled ? xp[r * 128 + i] * 20.0f : xp[r * 128 + i]);
  }
  EXPECT_EQ(scaled_rows, 4);  // two pairs of one KV head
}

// The same command writes the same bytes; the file names its spec in `model inspect`.
TEST(SynthOutliers, TheCommandIsDeterministicAndInspectShowsTheSpec) {
  const std::string dir = test::temp_dir("synth-outliers-cli");
  const std::string geom = "model synth --arch qwen2 --qkv-bias --layers 2 --hidden 128 --heads 2 --kv-heads 1 "
                           "--ffn 192 --vocab 300 --seed 7 --force ";
  const std::string args = geom + "--outliers sink=8,pairs=2,scale=20 -o ";
  std::string out;
  ASSERT_EQ(test::run_command(test::ember_binary() + " " + args + dir + "/a.gguf", &out), 0) << out;
  ASSERT_EQ(test::run_command(test::ember_binary() + " " + args + dir + "/b.gguf", &out), 0) << out;
  const std::vector<uint8_t> bytes = test::read_bytes(dir + "/a.gguf");
  EXPECT_EQ(bytes, test::read_bytes(dir + "/b.gguf"));
  EXPECT_EQ(bytes, fixture::to_bytes(synth_model([] {
              SynthSpec s = geometry("pairs=2,scale=20,sink=8");
              s.pre_tokenizer = "bloom";
              return s;
            }())));
  ASSERT_EQ(test::run_command(test::ember_binary() + " model inspect --json " + dir + "/a.gguf", &out), 0) << out;
  EXPECT_EQ(nlohmann::json::parse(out)["synth_outliers"], "pairs=2,scale=20,sink=8");
  ASSERT_EQ(test::run_command(test::ember_binary() + " model inspect " + dir + "/a.gguf", &out), 0) << out;
  EXPECT_NE(out.find("synthetic:    K outliers and sink pairs=2,scale=20,sink=8"), std::string::npos) << out;
  // A bad spec exits 2 with the one line; --outliers is refused beside --derive-from.
  EXPECT_EQ(test::run_command(test::ember_binary() + " " + geom + "--outliers pairs=2 -o " + dir + "/c.gguf", &out), 2);
  EXPECT_NE(out.find("ember: synth: --outliers: expected scale=S beside pairs=N, found 'pairs=2'"), std::string::npos)
      << out;
  EXPECT_EQ(test::run_command(test::ember_binary() + " model synth --derive-from " + dir + "/a.gguf --share-layers 1 "
                                  "--seed 2 --outliers sink=1 -o " + dir + "/d.gguf", &out), 2);
  EXPECT_NE(out.find("--outliers: expected not given with --derive-from"), std::string::npos) << out;
  // Nor is a base with outliers derived from: its re-drawn layers would not carry them.
  EXPECT_EQ(test::run_command(test::ember_binary() + " model synth --derive-from " + dir + "/a.gguf --share-layers 1 "
                                  "--seed 2 -o " + dir + "/d.gguf", &out), 2);
  EXPECT_NE(out.find("a.gguf: ember.synth.outliers: expected a base without `model synth --outliers`, found "
                     "'pairs=2,scale=20,sink=8'"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace ember::gguf::outliers_test
