#include "gguf/convert.h"

#include <algorithm>
#include <charconv>
#include <cstring>

#include "gguf/dequantize.h"
#include "gguf/quantize.h"
#include "gguf/writer.h"
#include "util/error.h"
#include "util/f16.h"

namespace ember::gguf {

bool is_model_target_type(TensorType t) {
  switch (t) {
    case TensorType::F32: case TensorType::F16: case TensorType::BF16: case TensorType::Q8_0:
    case TensorType::Q4_0: case TensorType::Q4_K: case TensorType::Q6_K:
      return true;
    default:
      return false;
  }
}

TensorType storage_type(TensorType target, uint64_t row_length) {
  if (row_length % traits(target).block_elems == 0) return target;
  if (traits(target).block_elems == 256 && row_length % 32 == 0) return TensorType::Q8_0;
  return TensorType::F16;
}

bool converts_tensor(const std::vector<uint64_t>& shape) { return shape.size() >= 2; }

namespace {

// The layer of "blk.N.*", -1 for any other name (llama.cpp's sscanf(name, "blk.%d.")).
int layer_of(const std::string& name) {
  int layer = -1;
  if (name.rfind("blk.", 0) == 0) std::from_chars(name.data() + 4, name.data() + name.size(), layer);
  return layer;
}

}  // namespace

std::vector<const TensorInfo*> llama_quantize_order(const std::vector<TensorInfo>& tensors) {
  std::vector<const TensorInfo*> order;
  for (const TensorInfo& t : tensors) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [](const TensorInfo* a, const TensorInfo* b) {
    const int la = layer_of(a->name), lb = layer_of(b->name);
    return la != lb ? la < lb : a->name < b->name;
  });
  return order;
}

uint32_t llama_file_type(TensorType target) {
  switch (target) {
    case TensorType::F32: return 0;    // LLAMA_FTYPE_ALL_F32
    case TensorType::F16: return 1;    // MOSTLY_F16
    case TensorType::Q4_0: return 2;   // MOSTLY_Q4_0
    case TensorType::Q8_0: return 7;   // MOSTLY_Q8_0
    case TensorType::Q4_K: return 14;  // MOSTLY_Q4_K_S (every matrix Q4_K)
    case TensorType::Q6_K: return 18;  // MOSTLY_Q6_K
    case TensorType::BF16: return 32;  // MOSTLY_BF16
    default: break;
  }
  fail_field("convert", "target type", "f32, f16, bf16, q8_0, q4_0, q4_K or q6_K",
             type_name(uint32_t(target)));
}

void encode_row(TensorType type, const float* src, int64_t n, std::vector<uint8_t>& scratch,
                ByteSink& out) {
  switch (type) {
    case TensorType::F32:
      out.write(src, size_t(n) * 4);
      return;
    case TensorType::F16: case TensorType::BF16: {
      scratch.resize(size_t(n) * 2);
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = type == TensorType::F16 ? f32_to_f16(src[i]) : f32_to_bf16(src[i]);
        std::memcpy(scratch.data() + 2 * i, &h, 2);
      }
      out.write(scratch.data(), scratch.size());
      return;
    }
    default:
      break;
  }
  if (!can_quantize_to(type))
    fail_field("convert", "storage type", "a type ember can quantize to",
               type_name(uint32_t(type)));
  scratch.resize(size_t(row_bytes(type, uint64_t(n))));
  const uint64_t written = quantize_row(type, src, scratch.data(), n);
  EMBER_CHECK(written == scratch.size());
  out.write(scratch.data(), scratch.size());
}

void decode_row(TensorType type, const uint8_t* src, float* dst, int64_t n) {
  if (type == TensorType::F32) {
    std::memcpy(dst, src, size_t(n) * 4);
    return;
  }
  dequantize_row(type, src, dst, n);
}

std::vector<ConvertedTensor> convert_model(const GgufFile& in, TensorType target,
                                           const std::string& out_path, bool force) {
  if (!is_model_target_type(target))
    fail_field(out_path, "--type", "f32, f16, bf16, q8_0, q4_0, q4_k or q6_k",
               type_name(uint32_t(target)));
  GgufWriter w;
  w.copy_metadata(in);
  // llama-quantize's order, so the file is byte for byte its file: both keys removed, then
  // quantization_version appended, then file_type (gguf_set_val removes, then appends).
  w.remove("general.quantization_version");
  w.remove("general.file_type");
  if (traits(target).block_elems > 1) w.set_u32("general.quantization_version", 2);
  w.set_u32("general.file_type", llama_file_type(target));
  std::vector<ConvertedTensor> report;
  for (const TensorInfo* tensor : llama_quantize_order(in.tensors())) {
    const TensorInfo& t = *tensor;
    const TensorType to =
        converts_tensor(t.shape) ? storage_type(target, t.row_length()) : TensorType::F32;
    report.push_back({t.name, t.type, to, converts_tensor(t.shape) && to != target});
    if (to == t.type) {  // nothing to convert: copy the bytes straight from the mapping
      const TensorInfo* src = &t;
      w.add_tensor(t.name, t.shape, t.type,
                   [src](ByteSink& out) { out.write(src->data, size_t(src->n_bytes)); });
      continue;
    }
    const TensorInfo* src = &t;
    w.add_tensor(t.name, t.shape, to, [src, to](ByteSink& out) {
      const int64_t n = int64_t(src->row_length());
      const uint64_t src_row = row_bytes(src->type, uint64_t(n));
      std::vector<float> row(static_cast<size_t>(n));
      std::vector<uint8_t> scratch;
      for (uint64_t r = 0; r < src->n_rows(); ++r) {
        decode_row(src->type, src->data + r * src_row, row.data(), n);
        encode_row(to, row.data(), n, scratch, out);
      }
    });
  }
  w.write_file(out_path, force);
  return report;
}

}  // namespace ember::gguf
