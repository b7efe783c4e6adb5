#include "model/tiny_model.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "gguf/quantize.h"
#include "gguf/types.h"
#include "gguf/writer.h"
#include "util/byte_io.h"
#include "util/f16.h"

namespace ember::test {

namespace {

struct Rng {
  uint64_t s;
  double uniform() {  // [0, 1), splitmix64
    uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return double((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
  }
  float normal(float sd) {  // Box-Muller
    const double u1 = 1.0 - uniform(), u2 = uniform();
    return float(sd * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }
};

std::vector<uint8_t> encode(const std::vector<float>& v, gguf::TensorType type, int64_t row) {
  using gguf::TensorType;
  if (type == TensorType::F32) {
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  }
  if (type == TensorType::F16) {
    std::vector<uint8_t> b(v.size() * 2);
    for (size_t i = 0; i < v.size(); ++i) {
      const uint16_t h = f32_to_f16(v[i]);
      std::memcpy(b.data() + 2 * i, &h, 2);
    }
    return b;
  }
  const int64_t rows = int64_t(v.size()) / row;
  const uint64_t rb = gguf::row_bytes(type, uint64_t(row));
  std::vector<uint8_t> b(size_t(rb * uint64_t(rows)));
  for (int64_t r = 0; r < rows; ++r) gguf::quantize_row(type, v.data() + r * row, b.data() + r * rb, row);
  return b;
}

}  // namespace

std::string TinySpec::name() const {
  return arch + "-L" + std::to_string(layers) + "-H" + std::to_string(heads) + "-G" +
         std::to_string(kv_heads) + (bias ? "-bias" : "") + (qk_norm ? "-qknorm" : "") +
         (tied ? "-tied" : "") + "-" + gguf::traits(wtype).name +
         (rope_scaling != "none" ? "-" + rope_scaling : "");
}

gguf::GgufFile make_tiny_gguf(const TinySpec& s) {
  Rng rng{s.seed * 7919 + 17};
  const int D = s.head_dim ? s.head_dim : s.embd / s.heads;
  gguf::GgufWriter w;
  const std::string a = s.arch;
  w.set_string("general.architecture", a);
  w.set_string("general.name", "tiny-" + s.name());
  w.set_u32(a + ".block_count", uint32_t(s.layers));
  w.set_u32(a + ".context_length", 256);
  w.set_u32(a + ".embedding_length", uint32_t(s.embd));
  w.set_u32(a + ".feed_forward_length", uint32_t(s.ff));
  w.set_u32(a + ".attention.head_count", uint32_t(s.heads));
  w.set_u32(a + ".attention.head_count_kv", uint32_t(s.kv_heads));
  if (s.head_dim) {
    w.set_u32(a + ".attention.key_length", uint32_t(D));
    w.set_u32(a + ".attention.value_length", uint32_t(D));
  }
  w.set_f32(a + ".attention.layer_norm_rms_epsilon", 1e-6f);
  if (s.theta > 0) w.set_f32(a + ".rope.freq_base", s.theta);
  if (s.rope_scaling != "none") {
    w.set_string(a + ".rope.scaling.type", s.rope_scaling);
    w.set_f32(a + ".rope.scaling.factor", 8.0f);
    if (s.rope_scaling == "llama3") {
      w.set_u32(a + ".rope.scaling.original_context_length", 64);
      w.set_f32(a + ".rope.scaling.low_freq_factor", 1.0f);
      w.set_f32(a + ".rope.scaling.high_freq_factor", 4.0f);
    }
  }
  auto matrix = [&](const std::string& name, int cols, int rows, float sd) {
    std::vector<float> v(size_t(cols) * rows);
    for (float& x : v) x = rng.normal(sd);
    w.add_tensor(name, {uint64_t(cols), uint64_t(rows)}, s.wtype, encode(v, s.wtype, cols));
  };
  auto vector = [&](const std::string& name, int n, float mean, float sd) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = mean + rng.normal(sd);
    w.add_tensor(name, {uint64_t(n)}, gguf::TensorType::F32, encode(v, gguf::TensorType::F32, n));
  };
  matrix("token_embd.weight", s.embd, s.vocab, 0.5f);
  vector("output_norm.weight", s.embd, 1.0f, 0.1f);
  if (!s.tied) matrix("output.weight", s.embd, s.vocab, 0.08f);
  const float sd = 0.08f;
  for (int l = 0; l < s.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    vector(p + "attn_norm.weight", s.embd, 1.0f, 0.1f);
    matrix(p + "attn_q.weight", s.embd, s.heads * D, sd);
    matrix(p + "attn_k.weight", s.embd, s.kv_heads * D, sd);
    matrix(p + "attn_v.weight", s.embd, s.kv_heads * D, sd);
    if (s.bias) {
      vector(p + "attn_q.bias", s.heads * D, 0.0f, 0.2f);
      vector(p + "attn_k.bias", s.kv_heads * D, 0.0f, 0.2f);
      vector(p + "attn_v.bias", s.kv_heads * D, 0.0f, 0.2f);
    }
    if (s.qk_norm) {
      vector(p + "attn_q_norm.weight", D, 1.0f, 0.2f);
      vector(p + "attn_k_norm.weight", D, 1.0f, 0.2f);
    }
    matrix(p + "attn_output.weight", s.heads * D, s.embd, sd);
    vector(p + "ffn_norm.weight", s.embd, 1.0f, 0.1f);
    matrix(p + "ffn_gate.weight", s.embd, s.ff, sd);
    matrix(p + "ffn_up.weight", s.embd, s.ff, sd);
    matrix(p + "ffn_down.weight", s.ff, s.embd, sd);
  }
  auto bytes = std::make_shared<std::vector<uint8_t>>();
  BufferSink sink(*bytes);
  w.write(sink);
  return gguf::GgufFile::parse(bytes, "tiny-" + s.name() + ".gguf");
}

std::shared_ptr<const model::Model> make_tiny_model(const TinySpec& spec) {
  return model::Model::load(make_tiny_gguf(spec));
}

}  // namespace ember::test
