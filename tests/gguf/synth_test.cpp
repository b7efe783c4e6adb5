// Synthetic models: determinism, llama.cpp naming and metadata, the built-in tokenizer,
// initial scales, type fallbacks, and write -> read -> write byte identity.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "gguf/convert.h"
#include "gguf/dequantize.h"
#include "gguf/gguf_file.h"
#include "gguf/identity.h"
#include "gguf/random.h"
#include "gguf/synth.h"
#include "gguf/synth_vocab.h"
#include "gguf_fixture.h"
#include "util/error.h"

namespace ember::gguf {
namespace {

SynthSpec small(const std::string& arch) { return fixture::small_synth(arch, 42); }

std::vector<uint8_t> synth_bytes(const SynthSpec& s) { return fixture::to_bytes(synth_model(s)); }

double stddev(const std::vector<float>& v, double* mean_out = nullptr) {
  double m = 0, q = 0;
  for (float x : v) m += x;
  m /= double(v.size());
  for (float x : v) q += (x - m) * (x - m);
  if (mean_out) *mean_out = m;
  return std::sqrt(q / double(v.size()));
}

std::vector<float> f32_values(const TensorInfo& t) {
  EXPECT_EQ(t.type, TensorType::F32) << t.name;
  std::vector<float> v(size_t(t.n_elements()));
  std::memcpy(v.data(), t.data, v.size() * 4);
  return v;
}

TEST(Synth, SameSeedSameBytesOtherSeedOtherWeights) {
  const auto a = synth_bytes(small("llama"));
  EXPECT_EQ(a, synth_bytes(small("llama")));
  SynthSpec other = small("llama");
  other.seed = 43;
  const GgufFile fa = fixture::parse_bytes(a), fb = fixture::parse_bytes(synth_bytes(other));
  EXPECT_NE(model_identity(fa).hex(), model_identity(fb).hex());
  EXPECT_NE(tensor_hash(fa.tensor("blk.0.attn_q.weight")),
            tensor_hash(fb.tensor("blk.0.attn_q.weight")));
}

TEST(Synth, PinnedBytesAcrossMachines) {
  // The generator uses only integer arithmetic and IEEE +,-,*,/,sqrt: these values must not
  // change with the machine, compiler or libm. If this fails, synthetic models (and every
  // identity derived from them) changed.
  const GgufFile f = fixture::parse_bytes(synth_bytes(small("llama")));
  const auto q = f32_values(f.tensor("blk.0.attn_q.weight"));
  SplitMix64 rng(derive_seed(42, "blk.0.attn_q.weight", 0));
  EXPECT_EQ(q[0], float(rng.normal() / 8.0));
  EXPECT_EQ(q[1], float(rng.normal() / 8.0));
  SplitMix64 pinned(0);
  EXPECT_EQ(pinned.next(), 0xe220a8397b1dcdafull);  // SplitMix64 reference output for seed 0
  // The whole file, pinned (recorded when the generator was written; update only on purpose,
  // together with docs/formats/gguf.md, as it changes every synthetic model).
  const auto bytes = synth_bytes(small("llama"));
  EXPECT_EQ(sha256_hex(bytes.data(), bytes.size()),
            "dc73e2d673c63dfbe817fea5f38a5c3956c804debc17968523d2ea183c628ff4");
  EXPECT_EQ(model_identity(f).hex(),
            "6fb7bbcad522aa698142f2fc327eea5e61562424c302c2fd2cd4bdabb551ad1d");
}

TEST(Synth, WriteReadWriteIsByteIdentical) {
  for (const char* arch : {"llama", "qwen2", "qwen3"}) {
    SCOPED_TRACE(arch);
    const auto bytes = synth_bytes(small(arch));
    const GgufFile f = fixture::parse_bytes(bytes);
    GgufWriter w;
    w.copy_metadata(f);
    for (const TensorInfo& t : f.tensors())
      w.add_tensor(t.name, t.shape, t.type, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
    EXPECT_EQ(fixture::to_bytes(w), bytes);
    const GgufFile g = fixture::parse_bytes(fixture::to_bytes(w));
    ASSERT_EQ(g.metadata().size(), f.metadata().size());
    for (size_t i = 0; i < f.metadata().size(); ++i)
      EXPECT_EQ(g.metadata()[i].first, f.metadata()[i].first);
    EXPECT_EQ(model_identity(f).hex(), model_identity(g).hex());
  }
}

TEST(Synth, LlamaCppNamesShapesAndKeys) {
  SynthSpec s = small("qwen3");
  s.head_dim = 32;  // != hidden / heads
  const GgufFile f = fixture::parse_bytes(synth_bytes(s));
  EXPECT_EQ(f.get_string("general.architecture"), "qwen3");
  EXPECT_EQ(f.get_int("qwen3.block_count"), 2);
  EXPECT_EQ(f.get_int("qwen3.embedding_length"), 64);
  EXPECT_EQ(f.get_int("qwen3.attention.head_count"), 4);
  EXPECT_EQ(f.get_int("qwen3.attention.head_count_kv"), 2);
  EXPECT_EQ(f.get_int("qwen3.attention.key_length"), 32);
  EXPECT_EQ(f.get_int("qwen3.attention.value_length"), 32);
  EXPECT_EQ(f.get_int("qwen3.feed_forward_length"), 96);
  EXPECT_EQ(f.get_int("qwen3.context_length"), 4096);
  EXPECT_EQ(f.get_float("qwen3.rope.freq_base"), 1e6);
  EXPECT_FLOAT_EQ(float(f.get_float("qwen3.attention.layer_norm_rms_epsilon")), 1e-6f);
  EXPECT_EQ(f.tensor("token_embd.weight").shape, (std::vector<uint64_t>{64, 300}));
  EXPECT_EQ(f.tensor("blk.1.attn_q.weight").shape, (std::vector<uint64_t>{64, 128}));
  EXPECT_EQ(f.tensor("blk.1.attn_k.weight").shape, (std::vector<uint64_t>{64, 64}));
  EXPECT_EQ(f.tensor("blk.1.attn_output.weight").shape, (std::vector<uint64_t>{128, 64}));
  EXPECT_EQ(f.tensor("blk.1.attn_q_norm.weight").shape, (std::vector<uint64_t>{32}));
  EXPECT_EQ(f.tensor("blk.1.attn_k_norm.weight").shape, (std::vector<uint64_t>{32}));
  EXPECT_EQ(f.tensor("blk.1.ffn_down.weight").shape, (std::vector<uint64_t>{96, 64}));
  EXPECT_EQ(f.find_tensor("blk.0.attn_q.bias"), nullptr);
  EXPECT_NE(f.find_tensor("output.weight"), nullptr);  // not --tied
  EXPECT_EQ(f.tensors().size(), 1 + 2 * 11 + 2u);

  SynthSpec q2 = small("qwen2");
  q2.tied = true;
  const GgufFile g = fixture::parse_bytes(synth_bytes(q2));
  EXPECT_EQ(g.find_tensor("output.weight"), nullptr);
  EXPECT_EQ(g.tensor("blk.0.attn_k.bias").shape, (std::vector<uint64_t>{32}));
  EXPECT_FALSE(g.has("qwen2.attention.key_length"));
  const GgufFile l = fixture::parse_bytes(synth_bytes(small("llama")));
  EXPECT_EQ(l.get_int("llama.rope.dimension_count"), 16);
  EXPECT_EQ(l.get_float("llama.rope.freq_base"), 10000.0);
  EXPECT_EQ(l.get_int("general.file_type"), 0);
}

TEST(Synth, BuiltInByteTokenizer) {
  const GgufFile f = fixture::parse_bytes(synth_bytes(small("llama")));
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(f.get_string("tokenizer.ggml.pre"), "ember-bytes");
  const auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  const auto types = f.get_int_array("tokenizer.ggml.token_type");
  const auto merges = f.get_string_array("tokenizer.ggml.merges");
  ASSERT_EQ(tokens.size(), 300u);
  ASSERT_EQ(types.size(), 300u);
  EXPECT_EQ(tokens['A'], "A");
  EXPECT_EQ(tokens[' '], "\xc4\xa0");   // U+0120 'Ġ'
  EXPECT_EQ(tokens[0], "\xc4\x80");     // U+0100
  EXPECT_EQ(tokens['\n'], "\xc4\x8a");  // U+010A 'Ċ'
  EXPECT_EQ(tokens[0xad], "\xc5\x83");  // soft hyphen, the last non-printable: U+0143
  EXPECT_EQ(tokens[0xff], "\xc3\xbf");  // 'ÿ' keeps its code point
  std::set<std::string> uniq(tokens.begin(), tokens.end());
  EXPECT_EQ(uniq.size(), tokens.size());
  const int64_t bos = f.get_int("tokenizer.ggml.bos_token_id");
  const int64_t eos = f.get_int("tokenizer.ggml.eos_token_id");
  EXPECT_EQ(bos, 256 + int64_t(merges.size()));
  EXPECT_EQ(eos, bos + 1);
  EXPECT_EQ(tokens[size_t(bos)], "<|bos|>");
  EXPECT_EQ(tokens[size_t(eos)], "<|eos|>");
  EXPECT_EQ(tokens[299], "<|reserved_" + std::to_string(299 - eos - 1) + "|>");
  EXPECT_EQ(types[0], 1);
  EXPECT_EQ(types[size_t(bos)], 3);
  EXPECT_EQ(types[299], 3);
  EXPECT_TRUE(f.get_bool("tokenizer.ggml.add_bos_token"));
  // Each merge joins two tokens that exist before its result, which is a token too.
  ASSERT_EQ(merges.size(), 16u);
  for (size_t m = 0; m < merges.size(); ++m) {
    const auto sp = merges[m].find(' ');
    ASSERT_NE(sp, std::string::npos);
    const std::string l = merges[m].substr(0, sp), r = merges[m].substr(sp + 1);
    const auto pos = [&](const std::string& t) {
      return size_t(std::find(tokens.begin(), tokens.end(), t) - tokens.begin());
    };
    EXPECT_LT(pos(l), 256 + m) << merges[m];
    EXPECT_LT(pos(r), 256 + m) << merges[m];
    EXPECT_EQ(pos(l + r), 256 + m) << merges[m];
  }
  // The smallest vocabulary has no merges; below it is a clear error.
  EXPECT_EQ(synth_vocab(258).merges.size(), 0u);
  SynthSpec s = small("llama");
  s.vocab = 257;
  try {
    synth_model(s);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "synth: --vocab: expected >= 258 (256 byte tokens + <|bos|> + <|eos|>), found 257");
  }
}

TEST(Synth, RealisticInitialScales) {
  SynthSpec s = small("qwen2");
  s.hidden = 256, s.ffn = 512, s.vocab = 1024;
  const GgufFile f = fixture::parse_bytes(synth_bytes(s));
  double mean = 0;
  EXPECT_NEAR(stddev(f32_values(f.tensor("blk.0.attn_q.weight"))), 1.0 / 16, 0.002);
  EXPECT_NEAR(stddev(f32_values(f.tensor("blk.1.ffn_down.weight"))), 1.0 / std::sqrt(512.0),
              0.002);
  EXPECT_NEAR(stddev(f32_values(f.tensor("token_embd.weight"))), 2.0 / 16, 0.002);
  EXPECT_NEAR(stddev(f32_values(f.tensor("blk.0.attn_norm.weight")), &mean), 0.05, 0.01);
  EXPECT_NEAR(mean, 1.0, 0.01);
  EXPECT_NEAR(stddev(f32_values(f.tensor("blk.0.attn_v.bias")), &mean), 0.05, 0.02);
  EXPECT_NEAR(mean, 0.0, 0.03);
}

TEST(Synth, QuantizedTypesAndFallbacks) {
  SynthSpec s = small("llama");
  s.hidden = 256, s.heads = 4, s.kv_heads = 2, s.ffn = 288;  // ffn_down rows: 288 = 9 * 32
  s.type = TensorType::Q4_K;
  std::vector<SynthTensorNote> notes;
  const GgufFile f = fixture::parse_bytes(fixture::to_bytes(synth_model(s, &notes)));
  EXPECT_EQ(f.tensor("blk.0.attn_q.weight").type, TensorType::Q4_K);
  EXPECT_EQ(f.tensor("blk.0.ffn_down.weight").type, TensorType::Q8_0);
  EXPECT_EQ(f.tensor("blk.0.attn_norm.weight").type, TensorType::F32);
  ASSERT_EQ(notes.size(), 2u);  // ffn_down of both layers
  EXPECT_EQ(notes[0].name, "blk.0.ffn_down.weight");
  EXPECT_EQ(f.get_int("general.file_type"), 14);
  EXPECT_EQ(f.get_int("general.quantization_version"), 2);
  // q8_0 with rows not a multiple of 32 falls back to f16.
  SynthSpec t = small("llama");
  t.ffn = 100;
  t.type = TensorType::Q8_0;
  const GgufFile g = fixture::parse_bytes(synth_bytes(t));
  EXPECT_EQ(g.tensor("blk.0.ffn_down.weight").type, TensorType::F16);
  EXPECT_EQ(g.tensor("blk.0.ffn_up.weight").type, TensorType::Q8_0);
  EXPECT_EQ(storage_type(TensorType::Q6_K, 64), TensorType::Q8_0);
  EXPECT_EQ(storage_type(TensorType::Q6_K, 512), TensorType::Q6_K);
  EXPECT_EQ(storage_type(TensorType::Q4_0, 48), TensorType::F16);
}

TEST(Synth, QuantizedWeightsAreTheF32WeightsQuantized) {
  SynthSpec s = small("llama");
  s.hidden = 256, s.ffn = 512;
  const GgufFile f32 = fixture::parse_bytes(synth_bytes(s));
  s.type = TensorType::Q8_0;
  const GgufFile q8 = fixture::parse_bytes(synth_bytes(s));
  const auto ref = f32_values(f32.tensor("blk.1.ffn_up.weight"));
  const auto deq = dequantize_tensor(q8.tensor("blk.1.ffn_up.weight"));
  ASSERT_EQ(ref.size(), deq.size());
  double max_err = 0;
  for (size_t i = 0; i < ref.size(); ++i) max_err = std::max(max_err, double(std::fabs(ref[i] - deq[i])));
  // Q8_0: |error| <= d/2 with d = amax/127 per block; amax < 3.47 * std here.
  EXPECT_LT(max_err, 3.47 / 16 / 127 / 2 * 1.01);
  EXPECT_GT(max_err, 0.0);
}

TEST(Synth, PresetsHaveTheRealGeometries) {
  const SynthSpec q = resolve_synth_spec(synth_preset("qwen2.5-0.5b"));
  EXPECT_EQ(q.arch, "qwen2");
  EXPECT_EQ(q.layers, 24);
  EXPECT_EQ(q.hidden, 896);
  EXPECT_EQ(q.heads, 14);
  EXPECT_EQ(q.kv_heads, 2);
  EXPECT_EQ(q.head_dim, 64);
  EXPECT_EQ(q.ffn, 4864);
  EXPECT_EQ(q.vocab, 151936);
  EXPECT_TRUE(q.qkv_bias && q.tied);
  const SynthSpec q15 = resolve_synth_spec(synth_preset("qwen2.5-1.5b"));
  EXPECT_EQ(q15.hidden, 1536);
  EXPECT_EQ(q15.head_dim, 128);
  const SynthSpec q3 = resolve_synth_spec(synth_preset("qwen3-0.6b"));
  EXPECT_EQ(q3.head_dim, 128);
  EXPECT_EQ(q3.heads * q3.head_dim, 2048);  // != hidden 1024
  EXPECT_TRUE(q3.qk_norm && q3.tied);
  EXPECT_THROW(synth_preset("gpt-5"), Error);

  // Llama 3.2: llama3 RoPE scaling as llama.cpp's converter writes it (rope_freqs.weight).
  SynthSpec l = synth_preset("llama-3.2-1b");
  EXPECT_EQ(l.hidden, 2048);
  EXPECT_EQ(l.rope_theta, 500000);
  l.layers = 1, l.hidden = 256, l.heads = 4, l.kv_heads = 2, l.ffn = 256, l.vocab = 300;
  const GgufFile f = fixture::parse_bytes(synth_bytes(l));
  const auto freqs = f32_values(f.tensor("rope_freqs.weight"));
  ASSERT_EQ(freqs.size(), 32u);  // head_dim 64 / 2
  EXPECT_EQ(freqs.front(), 1.0f);  // highest frequency: unscaled
  EXPECT_EQ(freqs.back(), 32.0f);  // lowest: scaled by the factor
  for (size_t i = 1; i < freqs.size(); ++i) EXPECT_GE(freqs[i], freqs[i - 1]);
  EXPECT_EQ(f.get_string("ember.rope.scaling.type"), "llama3");
  EXPECT_EQ(f.get_int("ember.rope.scaling.original_context_length"), 8192);
  EXPECT_EQ(f.get_int("llama.context_length"), 131072);
}

TEST(Synth, RejectsInconsistentGeometry) {
  auto err = [](SynthSpec s) {
    try {
      resolve_synth_spec(s);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  SynthSpec s = small("llama");
  s.kv_heads = 3;
  EXPECT_EQ(err(s), "synth: --kv-heads: expected a divisor of --heads 4, found 3");
  s = small("qwen2");
  s.qkv_bias = false;
  EXPECT_NE(err(s).find("--qkv-bias: expected set for arch qwen2"), std::string::npos);
  s = small("llama");
  s.qk_norm = true;
  EXPECT_EQ(err(s), "synth: --qk-norm: expected only with arch qwen3, found arch llama");
  s = small("llama");
  s.arch = "gpt2";
  EXPECT_EQ(err(s), "synth: --arch: expected llama, qwen2 or qwen3, found 'gpt2'");
  s = small("llama");
  s.head_dim = 15;
  EXPECT_NE(err(s).find("--head-dim: expected an even number"), std::string::npos);
  s = small("llama");
  s.layers = 0;
  EXPECT_EQ(err(s), "synth: --layers: expected 1..1024, found 0");
}

}  // namespace
}  // namespace ember::gguf
