// `ember model inspect` (gguf::summarize) and the engine (ModelConfig::from_gguf) read the same
// defaults for every architecture of the table (gguf/arch.h), on files that leave out every
// optional key: the issue-29 bug was inspect reporting theta 10000 for a qwen file the engine
// runs at 1e6.
#include <gtest/gtest.h>

#include "gguf/arch.h"
#include "gguf/summary.h"
#include "gguf/synth.h"
#include "model/config.h"
#include "util/byte_io.h"
#include "util/error.h"

namespace ember::model {
namespace {

using gguf::Key;

// A synthetic model of `arch` without any optional <arch>.* key.
gguf::GgufFile bare_model(const gguf::ArchInfo& info) {
  gguf::SynthSpec s;
  s.arch = info.name;
  s.layers = 1, s.hidden = 64, s.heads = 4, s.kv_heads = 4, s.ffn = 96, s.vocab = 300, s.seed = 3;
  s.qkv_bias = info.qkv_bias == gguf::Feature::required;
  s.qk_norm = info.qk_norm == gguf::Feature::required;
  gguf::GgufWriter w = gguf::synth_model(s);
  for (Key k : {Key::context_length, Key::head_count_kv, Key::key_length, Key::value_length, Key::rms_eps,
                Key::rope_freq_base, Key::rope_dimension_count, Key::vocab_size})
    w.remove(gguf::key(info.name, k));
  auto bytes = std::make_shared<std::vector<uint8_t>>();
  BufferSink sink(*bytes);
  w.write(sink);
  return gguf::GgufFile::parse(bytes, std::string(info.name) + "-bare.gguf");
}

TEST(ArchDefaults, InspectAndTheEngineAgreeForEveryArchitecture) {
  ASSERT_EQ(gguf::archs().size(), 3u);  // a new row is covered here without a new test
  for (const gguf::ArchInfo& info : gguf::archs()) {
    SCOPED_TRACE(info.name);
    const gguf::GgufFile f = bare_model(info);
    for (Key k : {Key::context_length, Key::rms_eps, Key::rope_freq_base}) ASSERT_FALSE(f.has(gguf::key(info.name, k)));
    const ModelConfig c = ModelConfig::from_gguf(f);
    const gguf::ModelSummary s = gguf::summarize(f);
    EXPECT_EQ(c.arch, info.arch);
    EXPECT_EQ(s.architecture, info.name);
    // The defaults: the table's, in both readers.
    EXPECT_EQ(c.rope_theta, float(info.rope_theta));
    EXPECT_EQ(s.rope_theta, info.rope_theta);
    EXPECT_EQ(c.rms_eps, float(info.rms_eps));
    EXPECT_EQ(s.rms_eps, info.rms_eps);
    EXPECT_EQ(c.n_ctx, info.context);
    EXPECT_EQ(s.context, info.context);
    EXPECT_EQ(s.rope_layout, rope_layout_name(c.rope_layout));
    EXPECT_EQ(c.rope_layout, info.rope_layout);
    // What is derived when absent: kv heads = heads, head dim = hidden / heads, RoPE over all of it.
    EXPECT_EQ(s.kv_heads, c.n_kv_heads);
    EXPECT_EQ(c.n_kv_heads, 4);
    EXPECT_EQ(s.head_dim, c.head_dim);
    EXPECT_EQ(c.head_dim, 16);
    EXPECT_EQ(s.rope_dimensions, c.head_dim);
    EXPECT_EQ(s.vocab, c.n_vocab);
    EXPECT_EQ(s.qkv_bias, c.qkv_bias);
    EXPECT_EQ(s.qk_norm, c.qk_norm);
    EXPECT_EQ(s.tied_output, c.tied_output);
  }
  // The values behind the issue: qwen's theta is 1e6 in both.
  EXPECT_EQ(gguf::arch_info(gguf::Arch::qwen2).rope_theta, 1e6);
  EXPECT_EQ(gguf::arch_info(gguf::Arch::llama).rope_theta, 10000.0);
}

TEST(ArchDefaults, AnArchitectureOutsideTheTableIsReportedLeniently) {
  gguf::SynthSpec s;
  s.arch = "llama";
  s.layers = 1, s.hidden = 64, s.heads = 4, s.kv_heads = 4, s.ffn = 96, s.vocab = 300, s.seed = 3;
  gguf::GgufWriter w = gguf::synth_model(s);
  w.set_string("general.architecture", "gpt2");
  auto bytes = std::make_shared<std::vector<uint8_t>>();
  BufferSink sink(*bytes);
  w.write(sink);
  const gguf::GgufFile f = gguf::GgufFile::parse(bytes, "gpt2.gguf");
  const gguf::ModelSummary sum = gguf::summarize(f);
  EXPECT_EQ(sum.rope_layout, "unknown");
  EXPECT_EQ(sum.context, 0);
  EXPECT_EQ(sum.rope_theta, 10000.0);
  EXPECT_THROW(ModelConfig::from_gguf(f), Error);
}

}  // namespace
}  // namespace ember::model
