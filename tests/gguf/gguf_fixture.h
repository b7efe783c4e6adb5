#pragma once
// A small valid GGUF image with every metadata value type, nested arrays and three tensors
// of different types; the malformed-file corpus is built by editing its bytes.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gguf/synth.h"
#include "gguf/writer.h"
#include "util/byte_io.h"

namespace ember::gguf::fixture {

inline GgufWriter valid_writer() {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set("test.u08", Value::of_u8(200));
  w.set("test.i08", Value::of_i8(-100));
  w.set("test.u16", Value::of_u16(60000));
  w.set("test.i16", Value::of_i16(-30000));
  w.set("test.u32", Value::of_u32(4000000000u));
  w.set("test.i32", Value::of_i32(-2000000000));
  w.set("test.u64", Value::of_u64(18000000000000000000ull));
  w.set("test.i64", Value::of_i64(-9000000000000000000ll));
  w.set("test.f32", Value::of_f32(0.1f));
  w.set("test.f64", Value::of_f64(0.1));
  w.set("test.bool", Value::of_bool(true));
  w.set_string_array("test.strings", {"a", "bc", "", "d\xc3\xa9"});
  w.set("test.nested", Value::of_array(ValueType::ARRAY,
                                       {Value::of_array(ValueType::INT32,
                                                        {Value::of_i32(1), Value::of_i32(-2)}),
                                        Value::of_array(ValueType::STRING,
                                                        {Value::of_string("x")})}));
  w.set_alignment(64);
  std::vector<uint8_t> a(8 * 2 * 4), b(2 * 34), c(4 * 2);
  for (size_t i = 0; i < a.size(); ++i) a[i] = uint8_t(i * 7 + 1);
  for (size_t i = 0; i < b.size(); ++i) b[i] = uint8_t(i * 13 + 5);
  for (size_t i = 0; i < c.size(); ++i) c[i] = uint8_t(i + 60);
  w.add_tensor("a.weight", {8, 2}, TensorType::F32, a);
  w.add_tensor("b.weight", {32, 2}, TensorType::Q8_0, b);
  w.add_tensor("c.norm", {4}, TensorType::F16, c);
  return w;
}

inline std::vector<uint8_t> to_bytes(const GgufWriter& w) {
  std::vector<uint8_t> out;
  BufferSink sink(out);
  w.write(sink);
  return out;
}

inline GgufFile parse_bytes(std::vector<uint8_t> bytes, std::string name = "test.gguf") {
  return GgufFile::parse(std::make_shared<const std::vector<uint8_t>>(std::move(bytes)),
                         std::move(name));
}

// Offset of the first occurrence of `needle` (bytes of a name as stored), or npos.
inline size_t find_bytes(const std::vector<uint8_t>& hay, const std::string& needle,
                         size_t from = 0) {
  for (size_t i = from; i + needle.size() <= hay.size(); ++i)
    if (std::memcmp(hay.data() + i, needle.data(), needle.size()) == 0) return i;
  return std::string::npos;
}

template <typename T>
void poke(std::vector<uint8_t>& b, size_t at, T v) {
  std::memcpy(b.data() + at, &v, sizeof v);
}
template <typename T>
T peek(const std::vector<uint8_t>& b, size_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof v);
  return v;
}

// A small synthetic model of `arch` (2 layers, hidden 64, 4/2 heads, ffn 96, vocab 300) with
// the features the architecture requires.
inline SynthSpec small_synth(const std::string& arch, uint64_t seed) {
  SynthSpec s;
  s.arch = arch;
  s.layers = 2, s.hidden = 64, s.heads = 4, s.kv_heads = 2, s.ffn = 96, s.vocab = 300;
  s.qkv_bias = arch == "qwen2";
  s.qk_norm = arch == "qwen3";
  s.seed = seed;
  return s;
}

}  // namespace ember::gguf::fixture
