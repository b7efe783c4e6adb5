// GGUF reader: every value type, round trips through the writer, and a corpus of malformed
// files built by editing a valid image, each asserting its own error text.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "gguf/gguf_file.h"
#include "gguf/types.h"
#include "gguf/writer.h"
#include "gguf_fixture.h"
#include "support/test_support.h"
#include "util/error.h"

namespace ember::gguf {
namespace {

using fixture::find_bytes;
using fixture::parse_bytes;
using fixture::peek;
using fixture::poke;

TEST(GgufTypes, BlockGeometryMatchesGgml) {
  struct Want { TensorType t; uint32_t elems, bytes; bool supported; };
  const Want want[] = {
      {TensorType::F32, 1, 4, true},     {TensorType::F16, 1, 2, true},
      {TensorType::BF16, 1, 2, true},    {TensorType::Q4_0, 32, 18, true},
      {TensorType::Q4_1, 32, 20, true},  {TensorType::Q5_0, 32, 22, true},
      {TensorType::Q5_1, 32, 24, true},  {TensorType::Q8_0, 32, 34, true},
      {TensorType::Q8_1, 32, 36, false}, {TensorType::Q2_K, 256, 84, false},
      {TensorType::Q3_K, 256, 110, false}, {TensorType::Q4_K, 256, 144, true},
      {TensorType::Q5_K, 256, 176, true}, {TensorType::Q6_K, 256, 210, true},
      {TensorType::Q8_K, 256, 292, false},
  };
  for (const Want& w : want) {
    const TypeTraits& t = traits(w.t);
    EXPECT_EQ(t.block_elems, w.elems) << t.name;
    EXPECT_EQ(t.block_bytes, w.bytes) << t.name;
    EXPECT_EQ(t.supported, w.supported) << t.name;
  }
  EXPECT_FALSE(type_traits(4).has_value());   // Q4_2, removed from GGML
  EXPECT_FALSE(type_traits(31).has_value());  // Q4_0_4_4, never valid in files
  EXPECT_EQ(type_name(1234), "unknown(1234)");
  EXPECT_EQ(type_name(12), "q4_K");
  EXPECT_EQ(parse_type_name("Q4_K"), TensorType::Q4_K);
  EXPECT_EQ(parse_type_name("bf16"), TensorType::BF16);
  EXPECT_FALSE(parse_type_name("q4_k_m").has_value());
  EXPECT_EQ(row_bytes(TensorType::Q6_K, 512), 420u);
  EXPECT_EQ(supported_type_names(), "f32,f16,q4_0,q4_1,q5_0,q5_1,q8_0,q4_K,q5_K,q6_K,bf16");
}

TEST(GgufReader, ReadsEveryValueType) {
  const GgufFile f = parse_bytes(fixture::to_bytes(fixture::valid_writer()));
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.data_offset() % 64, 0u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_int("test.u08"), 200);
  EXPECT_EQ(f.get_int("test.i08"), -100);
  EXPECT_EQ(f.get_int("test.u16"), 60000);
  EXPECT_EQ(f.get_int("test.i16"), -30000);
  EXPECT_EQ(f.get_int("test.u32"), 4000000000ll);
  EXPECT_EQ(f.get_int("test.i32"), -2000000000);
  EXPECT_EQ(f.find("test.u64")->u, 18000000000000000000ull);
  EXPECT_EQ(f.get_int("test.i64"), -9000000000000000000ll);
  EXPECT_EQ(f.get_float("test.f32"), double(0.1f));
  EXPECT_EQ(f.get_float("test.f64"), 0.1);
  EXPECT_TRUE(f.get_bool("test.bool"));
  EXPECT_EQ(f.get_string_array("test.strings"),
            (std::vector<std::string>{"a", "bc", "", "d\xc3\xa9"}));
  const Value* nested = f.find("test.nested");
  ASSERT_NE(nested, nullptr);
  ASSERT_EQ(nested->array.size(), 2u);
  EXPECT_EQ(nested->array[0].array_type, ValueType::INT32);
  EXPECT_EQ(nested->array[0].array[1].i, -2);
  EXPECT_EQ(nested->array[1].array[0].str, "x");
  // Wrong types and missing keys name the file and the key.
  EXPECT_THROW(f.get_string("test.u08"), Error);
  EXPECT_EQ(f.get_int_or("missing.key", 7), 7);
  try {
    f.get_int("test.u64");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("test.gguf: metadata 'test.u64'"), std::string::npos);
  }
  try {
    f.get_int("no.such.key");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "test.gguf: metadata 'no.such.key': expected present, found missing");
  }
}

TEST(GgufReader, ReadsTensorInfosAndData) {
  const GgufFile f = parse_bytes(fixture::to_bytes(fixture::valid_writer()));
  ASSERT_EQ(f.tensors().size(), 3u);
  const TensorInfo& b = f.tensor("b.weight");
  EXPECT_EQ(b.type, TensorType::Q8_0);
  EXPECT_EQ(b.shape, (std::vector<uint64_t>{32, 2}));
  EXPECT_EQ(b.n_bytes, 68u);
  EXPECT_EQ(b.n_rows(), 2u);
  EXPECT_EQ(b.offset % 64, 0u);
  EXPECT_EQ(b.data[0], 5);
  EXPECT_EQ(b.data[1], 18);
  EXPECT_EQ(f.tensor("c.norm").n_elements(), 4u);
  EXPECT_EQ(f.tensor("c.norm").data[3], 63);
  EXPECT_EQ(f.find_tensor("nope"), nullptr);
  EXPECT_THROW(f.tensor("nope"), Error);
}

TEST(GgufReader, ReadsVersion2) {
  auto bytes = fixture::to_bytes(fixture::valid_writer());
  poke<uint32_t>(bytes, 4, 2);
  EXPECT_EQ(parse_bytes(bytes).version(), 2u);
}

TEST(GgufWriter, RoundTripIsByteIdentical) {
  const auto bytes = fixture::to_bytes(fixture::valid_writer());
  const GgufFile f = parse_bytes(bytes);
  GgufWriter w;
  w.copy_metadata(f);
  for (const TensorInfo& t : f.tensors())
    w.add_tensor(t.name, t.shape, t.type, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
  EXPECT_EQ(fixture::to_bytes(w), bytes);
}

TEST(GgufWriter, RejectsBadTensors) {
  GgufWriter w;
  EXPECT_THROW(w.add_tensor("x", {31}, TensorType::Q8_0, std::vector<uint8_t>(34)), Error);
  EXPECT_THROW(w.add_tensor("x", {32}, TensorType::Q8_0, std::vector<uint8_t>(33)), Error);
  EXPECT_THROW(w.add_tensor("x", {1, 1, 1, 1, 1}, TensorType::F32, std::vector<uint8_t>(4)),
               Error);
  w.add_tensor("x", {32}, TensorType::Q8_0, std::vector<uint8_t>(34));
  EXPECT_THROW(w.add_tensor("x", {1}, TensorType::F32, std::vector<uint8_t>(4)), Error);
  EXPECT_THROW(w.set_alignment(48), Error);
  // A producer that writes the wrong number of bytes is caught at write time.
  w.add_tensor("y", {4}, TensorType::F32, [](ByteSink& out) { out.write_zeros(12); });
  std::vector<uint8_t> sink_bytes;
  BufferSink sink(sink_bytes);
  EXPECT_THROW(w.write(sink), Error);
}

TEST(GgufWriter, WriteFileRefusesToOverwrite) {
  const std::string dir = ember::test::temp_dir("gguf-writer");
  const std::string path = dir + "/m.gguf";
  const GgufWriter w = fixture::valid_writer();
  w.write_file(path, false);
  EXPECT_THROW(w.write_file(path, false), Error);
  w.write_file(path, true);
  const GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.tensors().size(), 3u);
  EXPECT_EQ(f.file_size(), fixture::to_bytes(w).size());
}

// ---- the malformed corpus ----

std::string parse_error(const std::vector<uint8_t>& bytes) {
  try {
    parse_bytes(bytes, "bad.gguf");
  } catch (const Error& e) {
    return e.what();
  }
  return "(parsed without error)";
}

struct Corpus : ::testing::Test {
  std::vector<uint8_t> good = fixture::to_bytes(fixture::valid_writer());
  // Offset of the value type (u32) right after a metadata key.
  size_t kv_type_at(const std::string& key) {
    const size_t at = find_bytes(good, key);
    EXPECT_NE(at, std::string::npos) << key;
    return at + key.size();
  }
  // Offset of n_dims (u32) right after a tensor name in the tensor infos.
  size_t tensor_at(const std::string& name) {
    const size_t at = find_bytes(good, name);
    EXPECT_NE(at, std::string::npos) << name;
    return at + name.size();
  }
  void expect(const std::vector<uint8_t>& bytes, const std::string& fragment) {
    const std::string err = parse_error(bytes);
    EXPECT_NE(err.find(fragment), std::string::npos) << "error: " << err << "\nwanted: " << fragment;
    EXPECT_EQ(err.find('\n'), std::string::npos) << "one line: " << err;
    EXPECT_EQ(err.rfind("bad.gguf: ", 0), 0u) << "names the file: " << err;
  }
};

TEST_F(Corpus, BadMagic) {
  auto b = good;
  b[3] = 'X';
  expect(b, "header.magic: expected \"GGUF\" (47 47 55 46), found 47 47 55 58");
  expect({}, "header.magic: expected 4 more bytes");
}

TEST_F(Corpus, UnsupportedVersion) {
  auto b = good;
  poke<uint32_t>(b, 4, 1);
  expect(b, "header.version: expected 2 or 3, found 1 (GGUF v1");
  poke<uint32_t>(b, 4, 4);
  expect(b, "header.version: expected 2 or 3, found 4");
}

TEST_F(Corpus, TruncatedHeader) {
  expect(std::vector<uint8_t>(good.begin(), good.begin() + 12), "header.tensor_count: expected 8 more bytes");
  expect(std::vector<uint8_t>(good.begin(), good.begin() + 20), "header.metadata_kv_count");
}

TEST_F(Corpus, CountsBeyondTheFileFailBeforeAllocating) {
  auto b = good;
  poke<uint64_t>(b, 16, uint64_t(1) << 60);
  expect(b, "header.metadata_kv_count: expected at most");
  b = good;
  poke<uint64_t>(b, 8, uint64_t(1) << 60);
  expect(b, "header.tensor_count: expected at most");
  // An array claiming 2^60 strings: rejected from its count, quickly, without allocating.
  b = good;
  const size_t at = kv_type_at("test.strings");
  ASSERT_EQ(peek<uint32_t>(b, at), uint32_t(ValueType::ARRAY));
  ASSERT_EQ(peek<uint64_t>(b, at + 8), 4u);
  poke<uint64_t>(b, at + 8, uint64_t(1) << 60);
  const auto t0 = std::chrono::steady_clock::now();
  expect(b, "metadata 'test.strings': expected at most");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
}

TEST_F(Corpus, StringLengthsBeyondTheFile) {
  auto b = good;
  poke<uint64_t>(b, 24, uint64_t(1) << 62);  // first key's length
  expect(b, "metadata[0].key: expected a string length <=");
  b = good;
  const size_t at = kv_type_at("general.architecture");
  poke<uint64_t>(b, at + 4, 1000000);
  expect(b, "metadata 'general.architecture': expected a string length <=");
  b = good;
  poke<uint64_t>(b, tensor_at("a.weight") - 8 - 8, uint64_t(-1));
  expect(b, "tensor[0].name: expected a string length <=");
}

TEST_F(Corpus, BadValueTypes) {
  auto b = good;
  poke<uint32_t>(b, kv_type_at("test.u08"), 13);
  expect(b, "metadata 'test.u08'.type: expected a value type 0..12, found 13");
  b = good;
  poke<uint32_t>(b, kv_type_at("test.strings") + 4, 99);
  expect(b, "metadata 'test.strings': expected an array element type 0..12, found 99");
  b = good;
  poke<uint8_t>(b, kv_type_at("test.bool") + 4, 2);
  expect(b, "metadata 'test.bool': expected a bool byte 0 or 1, found 2");
}

TEST_F(Corpus, NestingDepthLimit) {
  Value v = Value::of_array(ValueType::INT32, {Value::of_i32(1)});
  for (int d = 1; d < kMaxArrayDepth; ++d) v = Value::of_array(ValueType::ARRAY, {v});
  GgufWriter w;
  w.set("deep", v);
  EXPECT_NO_THROW(parse_bytes(fixture::to_bytes(w)));  // exactly the limit
  w.set("deep", Value::of_array(ValueType::ARRAY, {v}));
  expect(fixture::to_bytes(w), "metadata 'deep': expected arrays nested at most 8 deep");
}

TEST_F(Corpus, DuplicateNames) {
  auto b = good;
  std::memcpy(b.data() + find_bytes(b, "test.u16"), "test.u32", 8);
  expect(b, "metadata 'test.u32': expected unique metadata keys, found a second entry");
  b = good;
  std::memcpy(b.data() + find_bytes(b, "b.weight"), "a.weight", 8);
  expect(b, "tensor 'a.weight': expected unique tensor names, found a second tensor (tensor[1])");
}

TEST_F(Corpus, Alignment) {
  const size_t at = kv_type_at("general.alignment") + 4;
  auto b = good;
  poke<uint32_t>(b, at, 0);
  expect(b, "metadata 'general.alignment': expected a non-zero power of two, found 0");
  poke<uint32_t>(b, at, 48);
  expect(b, "found 48");
  b = good;
  poke<uint32_t>(b, at - 4, uint32_t(ValueType::INT32));
  expect(b, "metadata 'general.alignment': expected type uint32, found int32");
}

TEST_F(Corpus, BadDims) {
  const size_t at = tensor_at("a.weight");  // n_dims, then dims
  auto b = good;
  poke<uint32_t>(b, at, 5);
  expect(b, "tensor 'a.weight'.n_dims: expected 1..4, found 5");
  poke<uint32_t>(b, at, 0);
  expect(b, "tensor 'a.weight'.n_dims: expected 1..4, found 0");
  b = good;
  poke<uint64_t>(b, at + 4 + 8, 0);
  expect(b, "tensor 'a.weight'.shape[1]: expected 1..2^63-1, found 0");
  b = good;
  poke<uint64_t>(b, at + 4, uint64_t(1) << 40);
  poke<uint64_t>(b, at + 4 + 8, uint64_t(1) << 40);
  expect(b, "tensor 'a.weight'.shape[1]: expected an element count (product of dims) <= 2^63-1");
  b = good;
  poke<uint64_t>(b, at + 4, uint64_t(1) << 62);  // 2^62 f32 elements: 2^64 bytes
  poke<uint64_t>(b, at + 4 + 8, 1);
  expect(b, "tensor 'a.weight'.shape: expected a byte size that fits in 64 bits");
}

TEST_F(Corpus, UnknownAndUnsupportedTypes) {
  const size_t type_at = tensor_at("a.weight") + 4 + 16;
  auto b = good;
  ASSERT_EQ(peek<uint32_t>(b, type_at), 0u);
  poke<uint32_t>(b, type_at, 99);
  expect(b, "tensor 'a.weight'.type: expected a supported tensor type (f32,f16,");
  expect(b, "found unknown(99) (type 99), unknown to GGML");
  poke<uint32_t>(b, type_at, 10);
  expect(b, "found q2_K (type 10), which ember does not dequantize");
}

TEST_F(Corpus, RowLengthNotAMultipleOfTheBlock) {
  auto b = good;
  poke<uint32_t>(b, tensor_at("c.norm") + 4 + 8, uint32_t(TensorType::Q8_0));
  expect(b, "tensor 'c.norm'.shape[0]: expected a row length that is a multiple of 32 (the q8_0 "
            "block size), found 4");
}

TEST_F(Corpus, BadOffsets) {
  const size_t b_off = tensor_at("b.weight") + 4 + 16 + 4;
  const uint64_t orig = peek<uint64_t>(good, b_off);
  ASSERT_EQ(orig, 64u);
  auto b = good;
  poke<uint64_t>(b, b_off, orig + 4);
  expect(b, "tensor 'b.weight'.offset: expected a multiple of the alignment 64, found 68 (misaligned)");
  poke<uint64_t>(b, b_off, uint64_t(1) << 50);
  expect(b, "an offset past the end of the data section");
  poke<uint64_t>(b, b_off, 0);  // on top of a.weight
  expect(b, "tensor 'b.weight'.offset: expected data not overlapping tensor 'a.weight' [0, 64), "
            "found 0 (overlap)");
}

TEST_F(Corpus, TruncatedData) {
  GgufFile f = parse_bytes(good);
  const TensorInfo& c = f.tensor("c.norm");
  const size_t end_of_c = size_t(f.data_offset() + c.offset + c.n_bytes);
  expect(std::vector<uint8_t>(good.begin(), good.begin() + end_of_c - 1),
         "tensor 'c.norm'.offset: expected data [192, +8) inside the data section of 199 bytes, "
         "found a range running past the end of the file (truncated)");
  // Cut inside the padding before the data section.
  expect(std::vector<uint8_t>(good.begin(), good.begin() + f.data_offset() - 1),
         "data section: expected to start at offset");
}

// Every prefix of a valid file, and many deterministic byte edits, either parse or throw
// ember::Error: never crash (the sanitizer build runs this too).
TEST_F(Corpus, EveryPrefixAndRandomEditsFailCleanly) {
  for (size_t n = 0; n < good.size(); ++n) {
    if (n >= parse_bytes(good).data_offset() + 192 + 8) break;  // the rest is padding
    EXPECT_THROW(parse_bytes(std::vector<uint8_t>(good.begin(), good.begin() + n)), Error) << n;
  }
  uint64_t s = 12345;
  auto next = [&] {
    s += 0x9e3779b97f4a7c15ull;
    uint64_t z = s;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  int parsed = 0;
  for (int k = 0; k < 3000; ++k) {
    auto b = good;
    const int edits = 1 + int(next() % 4);
    for (int e = 0; e < edits; ++e) b[next() % b.size()] = uint8_t(next());
    try {
      const GgufFile f = parse_bytes(b);
      unsigned sum = 0;  // touch every byte: ASan would catch a range outside the buffer
      for (const auto& t : f.tensors()) {
        ASSERT_LE(f.data_offset() + t.offset + t.n_bytes, f.file_size());
        for (uint64_t i = 0; i < t.n_bytes; ++i) sum += t.data[i];
      }
      parsed += sum != 0xffffffffu;
    } catch (const Error&) {
    }
  }
  EXPECT_GT(parsed, 0);  // edits inside tensor data still parse
}

}  // namespace
}  // namespace ember::gguf
