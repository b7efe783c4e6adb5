// KVC1 container core: round trips and every named rejection, each built by editing a valid
// image (docs/formats/kvc1.md).
#include <gtest/gtest.h>

#include <cstring>

#include "kv/kvc1.h"
#include "support/test_support.h"
#include "util/atomic_file.h"
#include "util/json_strict.h"

namespace ember::kv {
namespace {

using nlohmann::json;

constexpr int kLayers = 2, kHeads = 2, kPos = 5, kDim = 8;

json test_header(const std::string& dtype = "f16") {
  return {{"artifact", {{"kind", "native"}}},
          {"format", "ember.kvc1"},
          {"state", {{"geometry", {{"layers", kLayers}, {"kv_heads", kHeads}, {"head_dim", kDim}, {"positions", kPos}}},
                     {"representation", {{"dtype", dtype}}},
                     {"note", "test"}}}};
}

std::vector<uint16_t> tensor_values(int i) {
  std::vector<uint16_t> v(size_t(kHeads) * kPos * kDim);
  for (size_t j = 0; j < v.size(); ++j) v[j] = uint16_t(0x3c00 + 31 * i + 7 * j);
  return v;
}

std::vector<Kvc1TensorSource> sources(std::vector<std::vector<uint16_t>>& data) {
  std::vector<Kvc1TensorSource> s;
  for (int i = 0; i < 2 * kLayers; ++i) {
    data.push_back(tensor_values(i));
    Kvc1TensorSource t;
    t.layer = uint32_t(i / 2);
    t.is_value = i % 2;
    t.shape[0] = kHeads; t.shape[1] = kPos; t.shape[2] = kDim;
    const auto* p = &data.back();
    t.emit = [p](ByteSink& out) { out.write(p->data(), p->size() * 2); };
    s.push_back(t);
  }
  return s;
}

std::vector<uint8_t> valid_image(const json& header = test_header()) {
  std::vector<std::vector<uint16_t>> data;
  data.reserve(8);
  std::vector<uint8_t> bytes;
  BufferSink sink(bytes);
  write_kvc1(sink, header, sources(data), "test");
  return bytes;
}

Kvc1File parse(std::vector<uint8_t> bytes) {
  return Kvc1File::parse(std::make_shared<const std::vector<uint8_t>>(std::move(bytes)), "x.kvc");
}

void expect_reject(std::vector<uint8_t> bytes, Kvc1Reject code, const std::string& what) {
  try {
    parse(std::move(bytes));
    ADD_FAILURE() << what << ": accepted";
  } catch (const Kvc1Error& e) {
    EXPECT_EQ(kvc1_reject_name(e.code()), std::string(kvc1_reject_name(code))) << what << ": " << e.what();
    EXPECT_NE(std::string(e.what()).find(std::string("[") + kvc1_reject_name(code) + "]"), std::string::npos) << e.what();
  }
}

template <typename T>
void put(std::vector<uint8_t>& b, size_t off, T v) { std::memcpy(b.data() + off, &v, sizeof v); }
template <typename T>
T get(const std::vector<uint8_t>& b, size_t off) { T v; std::memcpy(&v, b.data() + off, sizeof v); return v; }

size_t table_offset(const std::vector<uint8_t>& b) { return (32 + get<uint64_t>(b, 16) + 7) / 8 * 8; }
size_t entry(const std::vector<uint8_t>& b, int i) { return table_offset(b) + 80 * size_t(i); }

TEST(Kvc1, RoundTripIsExactAndCanonical) {
  const auto a = valid_image();
  const auto b = valid_image();
  EXPECT_EQ(a, b) << "same state, same bytes";
  const Kvc1File f = parse(a);
  EXPECT_EQ(f.artifact_kind(), "native");
  ASSERT_EQ(f.tensors().size(), size_t(2 * kLayers));
  for (int i = 0; i < 2 * kLayers; ++i) {
    EXPECT_EQ(f.tensors()[i].offset % 64, 0u);
    const auto want = tensor_values(i);
    EXPECT_EQ(std::memcmp(f.tensor_data(i), want.data(), want.size() * 2), 0) << i;
  }
  EXPECT_EQ(f.header(), test_header());
  EXPECT_EQ(f.file_length(), a.size());
}

TEST(Kvc1, FileWriteIsAtomicAndMappedReadAgrees) {
  const std::string dir = test::temp_dir("kvc1");
  std::vector<std::vector<uint16_t>> data;
  data.reserve(8);
  write_kvc1_file(dir + "/a.kvc", test_header(), sources(data), false);
  EXPECT_EQ(test::read_bytes(dir + "/a.kvc"), valid_image());
  EXPECT_EQ(Kvc1File::open(dir + "/a.kvc").tensors().size(), 4u);
  EXPECT_THROW(write_kvc1_file(dir + "/a.kvc", test_header(), sources(data), false), Error);
}

TEST(Kvc1, WriterRefusesASourceThatChangesBetweenPasses) {
  const std::string dir = test::temp_dir("kvc1");
  std::vector<std::vector<uint16_t>> data;
  data.reserve(8);
  auto s = sources(data);
  int calls = 0;
  s[3].emit = [&](ByteSink& out) {
    auto v = tensor_values(3);
    if (calls++) v[0] ^= 1;
    out.write(v.data(), v.size() * 2);
  };
  EXPECT_THROW(write_kvc1_file(dir + "/b.kvc", test_header(), s, false), Error);
  EXPECT_FALSE(path_exists(dir + "/b.kvc"));
  s = sources(data);
  s[1].shape[1] = kPos + 1;
  EXPECT_THROW(write_kvc1_file(dir + "/c.kvc", test_header(), s, false), Error);
}

TEST(Kvc1, RejectsPreambleEdits) {
  const auto ok = valid_image();
  auto b = ok; b[0] = 'X'; expect_reject(b, Kvc1Reject::bad_magic, "magic");
  b = ok; put<uint16_t>(b, 4, 1); expect_reject(b, Kvc1Reject::unsupported_version, "version 1 (no kind byte)");
  b = ok; put<uint16_t>(b, 4, 3); expect_reject(b, Kvc1Reject::unsupported_version, "version 3");
  b = ok; put<uint16_t>(b, 6, 4); expect_reject(b, Kvc1Reject::unknown_flag, "flag bit 2");
  b = ok; put<uint8_t>(b, 28, 0); expect_reject(b, Kvc1Reject::unknown_kind, "kind code 0");
  b = ok; put<uint8_t>(b, 28, 200); expect_reject(b, Kvc1Reject::unknown_kind, "kind code 200");
  b = ok; put<uint8_t>(b, 28, 2); expect_reject(b, Kvc1Reject::unknown_kind, "kind byte mapped, header native");
  b = ok; put<uint8_t>(b, 29, 1); expect_reject(b, Kvc1Reject::nonzero_reserved, "reserved byte 29");
  b = ok; put<uint8_t>(b, 31, 1); expect_reject(b, Kvc1Reject::nonzero_reserved, "reserved byte 31");
  b = ok; b.pop_back(); expect_reject(b, Kvc1Reject::truncated, "one byte short");
  b = ok; b.resize(40); expect_reject(b, Kvc1Reject::truncated, "cut in the header");
  b = ok; b.resize(10); expect_reject(b, Kvc1Reject::truncated, "cut in the preamble");
  b = ok; b.push_back(0); expect_reject(b, Kvc1Reject::trailing_bytes, "one trailing byte");
  b = ok; put<uint64_t>(b, 16, uint64_t(1) << 40); expect_reject(b, Kvc1Reject::bad_header, "absurd header length");
  b = ok; put<uint64_t>(b, 8, ok.size() + 64); b.resize(ok.size() + 64); expect_reject(b, Kvc1Reject::non_canonical_layout, "longer file_length");
}

TEST(Kvc1, RejectsHeaderEdits) {
  const auto ok = valid_image();
  const std::string text(reinterpret_cast<const char*>(ok.data() + 32), get<uint64_t>(ok, 16));
  auto edit = [&](const std::string& from, const std::string& to) {
    EXPECT_EQ(from.size(), to.size());
    auto b = ok;
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    std::memcpy(b.data() + 32 + at, to.data(), to.size());
    return b;
  };
  expect_reject(edit("\"native\"", "\"nativf\""), Kvc1Reject::bad_header, "unknown artifact kind");
  expect_reject(edit("\"f16\"", "\"f17\""), Kvc1Reject::unknown_dtype, "unknown header dtype");
  expect_reject(edit("\"f16\"", "\"f32\""), Kvc1Reject::unknown_dtype, "header dtype differs from table");
  expect_reject(edit("\"layers\":2", "\"layers\":3"), Kvc1Reject::bad_table, "more layers than tensors");
  expect_reject(edit("\"head_dim\":8", "\"head_dim\":4"), Kvc1Reject::bad_table, "shape differs");
  expect_reject(edit("{\"artifact\"", "{\"artifacu\""), Kvc1Reject::bad_header, "unknown top-level field");
  expect_reject(edit("\"note\":\"test\"", "\"note\": \"tes\""), Kvc1Reject::non_canonical_header, "whitespace");
  expect_reject(edit("\"note\":\"test\"", "\"note\":\"tes\"}"), Kvc1Reject::bad_header, "malformed JSON");
}

TEST(Kvc1, RejectsDuplicateKeysInHeader) {
  const auto ok = valid_image();
  json h = test_header();
  std::string dup = ember::canonical_json(h);
  const size_t n = dup.find("\"note\":\"test\"");
  dup.replace(n, 13, "\"note\":\"a\",\"note\":\"b\"");
  std::string img(reinterpret_cast<const char*>(ok.data()), 32);
  img += dup;
  img.resize(ok.size(), '\0');  // the rest does not matter: the header is refused first
  std::vector<uint8_t> c(img.begin(), img.end());
  put<uint64_t>(c, 16, dup.size());
  put<uint64_t>(c, 8, c.size());
  expect_reject(c, Kvc1Reject::bad_header, "duplicate key");
}

// A header is bounded by the number of JSON values it may hold, not only by its 64 MiB: a
// list of that many scalars would otherwise build a DOM far larger than the text.
TEST(Kvc1, RejectsHeaderWithTooManyValues) {
  const auto ok = valid_image();
  std::string big = ember::canonical_json(test_header());
  const size_t n = big.find("\"note\":\"test\"");
  std::string list = "\"note\":[0";
  list.reserve(2 * kKvc1MaxHeaderValues + 16);
  for (size_t i = 0; i < kKvc1MaxHeaderValues; ++i) list += ",0";
  big.replace(n, 13, list + "]");
  std::string img(reinterpret_cast<const char*>(ok.data()), 32);
  img += big;
  img.resize(img.size() + ok.size() - 32, '\0');  // payloads do not matter: the header is refused first
  std::vector<uint8_t> c(img.begin(), img.end());
  put<uint64_t>(c, 16, big.size());
  put<uint64_t>(c, 8, c.size());
  try {
    parse(c);
    ADD_FAILURE() << "accepted";
  } catch (const Kvc1Error& e) {
    EXPECT_EQ(e.code(), Kvc1Reject::bad_header) << e.what();
    EXPECT_NE(std::string(e.what()).find("at most " + std::to_string(kKvc1MaxHeaderValues) + " values"),
              std::string::npos) << e.what();
  }
}

TEST(Kvc1, RejectsTableEdits) {
  const auto ok = valid_image();
  auto b = ok; b[entry(ok, 1) + 5] = 7; expect_reject(b, Kvc1Reject::unknown_dtype, "dtype code 7");
  b = ok; b[entry(ok, 1) + 5] = 3; expect_reject(b, Kvc1Reject::unknown_dtype, "dtype differs from header");
  b = ok; put<uint16_t>(b, entry(ok, 0) + 6, 1); expect_reject(b, Kvc1Reject::nonzero_reserved, "entry reserved");
  b = ok; put<uint32_t>(b, entry(ok, 2), 0); expect_reject(b, Kvc1Reject::bad_table, "layer order");
  b = ok; b[entry(ok, 2) + 4] = 1; expect_reject(b, Kvc1Reject::bad_table, "kind order");
  b = ok; put<uint64_t>(b, entry(ok, 0) + 8, 3); expect_reject(b, Kvc1Reject::bad_table, "shape");
  b = ok; put<uint64_t>(b, entry(ok, 0) + 40, 162); expect_reject(b, Kvc1Reject::bad_length, "length");
  const uint64_t off0 = get<uint64_t>(ok, entry(ok, 0) + 32), off1 = get<uint64_t>(ok, entry(ok, 1) + 32);
  b = ok; put<uint64_t>(b, entry(ok, 1) + 32, off1 + 8); expect_reject(b, Kvc1Reject::misaligned_offset, "misaligned");
  b = ok; put<uint64_t>(b, entry(ok, 3) + 32, uint64_t(1) << 50); expect_reject(b, Kvc1Reject::offset_out_of_range, "past the end");
  b = ok; put<uint64_t>(b, entry(ok, 0) + 32, 0); expect_reject(b, Kvc1Reject::offset_out_of_range, "inside the header");
  b = ok; put<uint64_t>(b, entry(ok, 1) + 32, off0); expect_reject(b, Kvc1Reject::overlapping_tensors, "overlap");
  b = ok; put<uint64_t>(b, entry(ok, 0) + 32, off1); put<uint64_t>(b, entry(ok, 1) + 32, off0);
  expect_reject(b, Kvc1Reject::non_canonical_layout, "swapped offsets");
}

TEST(Kvc1, RejectsPayloadPaddingAndHashEdits) {
  const auto ok = valid_image();
  const uint64_t off0 = get<uint64_t>(ok, entry(ok, 0) + 32);
  const uint64_t len = get<uint64_t>(ok, entry(ok, 0) + 40);
  ASSERT_NE(len % 64, 0u) << "the test needs padding after a payload";
  auto b = ok; b[off0 + len] = 1; expect_reject(b, Kvc1Reject::nonzero_padding, "padding after tensor 0");
  b = ok; b[off0 + 3] ^= 0x10; expect_reject(b, Kvc1Reject::tensor_hash_mismatch, "flipped payload bit");
  // The same flip with the table hash updated to match: only the trailer can catch it.
  Sha256 h;
  h.update(b.data() + off0, len);
  const Digest d = h.finish();
  std::memcpy(b.data() + entry(ok, 0) + 48, d.data(), 32);
  expect_reject(b, Kvc1Reject::trailer_hash_mismatch, "payload and table edited");
  b = ok; b.back() ^= 1; expect_reject(b, Kvc1Reject::trailer_hash_mismatch, "trailer bit");
}

TEST(Kvc1, ArtifactIsItsKindAndTheKindByteAgrees) {
  json h = test_header();
  h["artifact"] = {{"kind", "mapped"}};
  const auto mapped = valid_image(h);
  EXPECT_EQ(mapped[28], uint8_t(Kvc1Kind::mapped));
  EXPECT_EQ(parse(mapped).kind(), Kvc1Kind::mapped);
  EXPECT_EQ(parse(mapped).artifact_kind(), "mapped");
  EXPECT_EQ(valid_image()[28], uint8_t(Kvc1Kind::native));
  // What a kind carries beyond its name is in its (sealed) state, never in artifact.
  h["artifact"]["mapper_hash"] = std::string(64, 'a');
  std::vector<std::vector<uint16_t>> data;
  data.reserve(8);
  std::vector<uint8_t> bytes;
  BufferSink sink(bytes);
  EXPECT_THROW(write_kvc1(sink, h, sources(data), "test"), Kvc1Error);
  h["artifact"] = {{"kind", "foreign-to-this-build"}};
  data.clear();
  EXPECT_THROW(write_kvc1(sink, h, sources(data), "test"), Kvc1Error);
}

TEST(Kvc1, FlippingTheKindFailsTheContainerCheck) {
  const auto ok = valid_image();
  // Every single-bit flip of the kind byte: an unknown code or one the header contradicts.
  for (int bit = 0; bit < 8; ++bit) {
    auto b = ok;
    b[28] ^= uint8_t(1u << bit);
    expect_reject(b, Kvc1Reject::unknown_kind, "kind bit " + std::to_string(bit));
  }
  // Relabelling both the byte and the header field (same length: "native" -> "mapped") is
  // caught by the trailer, which covers the preamble and the header.
  std::string text(ok.begin(), ok.end());
  const size_t at = text.find("\"kind\":\"native\"");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, std::strlen("\"kind\":\"native\""), "\"kind\":\"mapped\"");
  std::vector<uint8_t> b(text.begin(), text.end());
  b[28] = uint8_t(Kvc1Kind::mapped);
  expect_reject(b, Kvc1Reject::trailer_hash_mismatch, "kind relabelled in byte and header");
}

}  // namespace
}  // namespace ember::kv
