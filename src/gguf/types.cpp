#include "gguf/types.h"

#include <cctype>

#include "util/error.h"

namespace ember::gguf {
namespace {

// Every type number GGML has defined, with the block geometry of ggml-common.h. Numbers that
// GGML removed (4, 5: Q4_2/Q4_3; 31-33, 36-38: repacked layouts never valid in files) have no
// entry. `supported` marks what ember dequantizes (docs/formats/gguf.md).
struct Entry {
  uint32_t number;
  TypeTraits traits;
};
constexpr Entry kTypes[] = {
    {0, {"f32", 1, 4, true}},
    {1, {"f16", 1, 2, true}},
    {2, {"q4_0", 32, 18, true}},       // f16 d, 16 B nibbles
    {3, {"q4_1", 32, 20, true}},       // f16 d, f16 m, 16 B nibbles
    {6, {"q5_0", 32, 22, true}},       // f16 d, u32 high bits, 16 B nibbles
    {7, {"q5_1", 32, 24, true}},       // f16 d, f16 m, u32 high bits, 16 B nibbles
    {8, {"q8_0", 32, 34, true}},       // f16 d, 32 int8
    {9, {"q8_1", 32, 36, false}},      // f16 d, f16 s, 32 int8
    {10, {"q2_K", 256, 84, false}},    // 16 B scales, 64 B quants, f16 d, f16 dmin
    {11, {"q3_K", 256, 110, false}},   // 32 B hmask, 64 B quants, 12 B scales, f16 d
    {12, {"q4_K", 256, 144, true}},    // f16 d, f16 dmin, 12 B scales, 128 B nibbles
    {13, {"q5_K", 256, 176, true}},    // f16 d, f16 dmin, 12 B scales, 32 B high, 128 B nibbles
    {14, {"q6_K", 256, 210, true}},    // 128 B low, 64 B high, 16 int8 scales, f16 d
    {15, {"q8_K", 256, 292, false}},   // f32 d, 256 int8, 16 int16 sums
    {16, {"iq2_xxs", 256, 66, false}},
    {17, {"iq2_xs", 256, 74, false}},
    {18, {"iq3_xxs", 256, 98, false}},
    {19, {"iq1_s", 256, 50, false}},
    {20, {"iq4_nl", 32, 18, false}},   // f16 d, 16 B nibbles; KV caches only (quantize.h)
    {21, {"iq3_s", 256, 110, false}},
    {22, {"iq2_s", 256, 82, false}},
    {23, {"iq4_xs", 256, 136, false}},
    {24, {"i8", 1, 1, false}},
    {25, {"i16", 1, 2, false}},
    {26, {"i32", 1, 4, false}},
    {27, {"i64", 1, 8, false}},
    {28, {"f64", 1, 8, false}},
    {29, {"iq1_m", 256, 56, false}},
    {30, {"bf16", 1, 2, true}},
    {34, {"tq1_0", 256, 54, false}},
    {35, {"tq2_0", 256, 66, false}},
    {39, {"mxfp4", 32, 17, false}},
};

}  // namespace

std::optional<TypeTraits> type_traits(uint32_t raw_type) {
  for (const Entry& e : kTypes)
    if (e.number == raw_type) return e.traits;
  return std::nullopt;
}

const TypeTraits& traits(TensorType t) {
  for (const Entry& e : kTypes)
    if (e.number == uint32_t(t)) return e.traits;
  EMBER_CHECK(!"traits() of a TensorType value GGML does not define");
  __builtin_unreachable();
}

std::string type_name(uint32_t raw_type) {
  if (auto t = type_traits(raw_type)) return t->name;
  return "unknown(" + std::to_string(raw_type) + ")";
}

uint64_t row_bytes(TensorType t, uint64_t n) {
  const TypeTraits& tr = traits(t);
  return n / tr.block_elems * tr.block_bytes;
}

std::string supported_type_names() {
  std::string out;
  for (const Entry& e : kTypes) {
    if (!e.traits.supported) continue;
    if (!out.empty()) out += ",";
    out += e.traits.name;
  }
  return out;
}

std::optional<TensorType> parse_type_name(std::string_view name) {
  for (const Entry& e : kTypes) {
    std::string_view n = e.traits.name;
    if (n.size() != name.size()) continue;
    bool eq = true;
    for (size_t i = 0; i < n.size() && eq; ++i)
      eq = std::tolower(uint8_t(n[i])) == std::tolower(uint8_t(name[i]));  // "Q4_K" == "q4_k"
    if (eq) return TensorType(e.number);
  }
  return std::nullopt;
}

}  // namespace ember::gguf
