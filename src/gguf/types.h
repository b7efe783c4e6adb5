#pragma once
// GGML tensor types as GGUF numbers them, and their block geometry.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ember::gguf {

enum class TensorType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15, IQ4_NL = 20, BF16 = 30,
};

struct TypeTraits {
  const char* name;      // "q4_K" style as GGML names them
  uint32_t block_elems;  // elements per block (1 for float types)
  uint32_t block_bytes;  // bytes per block
  bool supported;        // ember can dequantize it
};

// Traits of a known type, or nullopt for a number GGML does not define / ember does not know.
std::optional<TypeTraits> type_traits(uint32_t raw_type);
const TypeTraits& traits(TensorType t);  // t must be known
std::string type_name(uint32_t raw_type);  // "q4_K" or "unknown(123)"
// Bytes of a row of n elements; n must be a multiple of block_elems (checked by caller).
uint64_t row_bytes(TensorType t, uint64_t n);
// "f32,f16,q4_0,..." : the types ember dequantizes, for error messages and docs.
std::string supported_type_names();
// Case-insensitive GGML name ("q4_K", "Q8_0", "bf16") to type; nullopt if unknown.
std::optional<TensorType> parse_type_name(std::string_view name);

}  // namespace ember::gguf
