// libFuzzer target over the GGUF parser (README "Fuzzing"). Contract under test: any byte
// string either parses or throws ember::Error; it never crashes, reads out of bounds, hangs
// or allocates from an unchecked size. A parsed file is then used the way ember uses it:
// every metadata value is walked, every getter tried, every tensor's bytes touched and
// dequantized (bounded per tensor so one input stays fast), the identity computed.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "gguf/dequantize.h"
#include "gguf/gguf_file.h"
#include "gguf/identity.h"
#include "gguf/summary.h"
#include "util/error.h"

namespace {

size_t walk(const ember::gguf::Value& v) {
  size_t n = 1 + v.str.size();
  for (const auto& e : v.array) n += walk(e);
  return n;
}

void use(const ember::gguf::GgufFile& f) {
  using namespace ember::gguf;
  size_t touched = 0;
  for (const auto& [key, value] : f.metadata()) {
    touched += walk(value);
    try {
      switch (value.type) {
        case ValueType::STRING: touched += f.get_string(key).size(); break;
        case ValueType::BOOL: touched += f.get_bool(key); break;
        case ValueType::FLOAT32: case ValueType::FLOAT64: touched += f.get_float(key) > 0; break;
        case ValueType::ARRAY:
          if (value.array_type == ValueType::STRING) touched += f.get_string_array(key).size();
          if (value.array_type == ValueType::FLOAT32 || value.array_type == ValueType::FLOAT64)
            touched += f.get_float_array(key).size();
          if (value.array_type == ValueType::INT32) touched += f.get_int_array(key).size();
          break;
        default: touched += f.get_int(key) > 0; break;
      }
    } catch (const ember::Error&) {
    }
  }
  std::vector<float> row;
  for (const TensorInfo& t : f.tensors()) {
    if (t.n_bytes) touched += t.data[0] + t.data[t.n_bytes - 1];
    const uint64_t n = t.row_length();
    const uint64_t rows = std::min<uint64_t>(t.n_rows(), n > (1u << 16) ? 0 : (1u << 16) / n);
    row.resize(size_t(std::min<uint64_t>(n, 1u << 16)));
    const uint64_t rb = row_bytes(t.type, n);
    for (uint64_t r = 0; r < rows; ++r) dequantize_row(t.type, t.data + r * rb, row.data(), int64_t(n));
  }
  const ModelSummary s = summarize(f);  // lenient metadata reads + identity over all bytes
  touched += s.tensors.size();
  if (touched == size_t(-1)) __builtin_trap();  // keep the work observable
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto bytes = std::make_shared<const std::vector<uint8_t>>(data, data + size);
  try {
    use(ember::gguf::GgufFile::parse(std::move(bytes), "fuzz-input"));
  } catch (const ember::Error&) {
  }
  return 0;
}
