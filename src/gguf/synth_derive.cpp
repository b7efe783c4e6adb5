// `ember model synth --derive-from`: a model sharing a base model's lower layers byte for byte
// and re-drawn above them (gguf/synth.h, derive_model).
#include <cmath>
#include <memory>

#include "gguf/convert.h"
#include "gguf/random.h"
#include "gguf/synth.h"
#include "util/error.h"

namespace ember::gguf {
namespace {

// The layer index of "blk.<l>.<...>", or -1 for a tensor outside the blocks.
int64_t block_of(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  const size_t dot = name.find('.', 4);
  if (dot == std::string::npos || dot == 4) return -1;
  int64_t l = 0;
  for (size_t i = 4; i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9' || l > (int64_t(1) << 40)) return -1;
    l = l * 10 + (name[i] - '0');
  }
  return l;
}

bool ends_with(const std::string& s, const char* suffix) {
  const size_t n = std::char_traits<char>::length(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// One row of a re-drawn tensor, with synth_model's scales (docs/formats/gguf.md).
void draw_row(const TensorInfo& t, uint64_t seed, uint64_t row, float* out) {
  const int64_t n = int64_t(t.row_length());
  SplitMix64 rng(derive_seed(seed, t.name, row));
  const bool norm = ends_with(t.name, "norm.weight"), bias = ends_with(t.name, ".bias");
  const double std = t.name == "output.weight" ? 2.0 / std::sqrt(double(n)) : 1.0 / std::sqrt(double(n));
  for (int64_t i = 0; i < n; ++i) {
    const double z = rng.normal();
    out[i] = float(norm ? 1.0 + 0.05 * z : bias ? 0.05 * z : std * z);
  }
}

}  // namespace

GgufWriter derive_model(const GgufFile& base, int64_t share_layers, uint64_t seed) {
  const std::string where = base.path().empty() ? std::string("--derive-from") : base.path();
  const std::string arch = base.get_string("general.architecture");
  const int64_t L = base.get_int(arch + ".block_count");
  if (share_layers < 0 || share_layers > L)
    fail_field(where, "--share-layers", "in [0, " + std::to_string(L) + "] (the base's " + arch + ".block_count)",
               std::to_string(share_layers));
  // The re-drawn layers would neither carry the outliers nor keep out of the sink's dim.
  if (base.has("ember.synth.outliers"))
    fail_field(where, "ember.synth.outliers", "a base without `model synth --outliers`",
               "'" + base.get_string_or("ember.synth.outliers", "") + "'");
  GgufWriter w;
  w.copy_metadata(base);
  w.set_string("general.name", base.get_string_or("general.name", "model") + "-derived-s" + std::to_string(share_layers));
  w.set_u32("ember.derive.share_layers", uint32_t(share_layers));
  w.set_u64("ember.derive.seed", seed);
  const uint64_t salted = seed ^ 0x6a09e667f3bcc909ull;  // never the base's own synth stream
  auto file = std::make_shared<const GgufFile>(base);     // shares the mapping
  for (const TensorInfo& t : base.tensors()) {
    const int64_t l = block_of(t.name);
    const bool redraw = (l >= share_layers) || t.name == "output_norm.weight" || t.name == "output.weight";
    if (redraw && t.type != TensorType::F32 && !is_model_target_type(t.type))
      fail_field(where, t.name, "a type ember can write (f32, f16, bf16, q8_0, q4_0, q4_K, q6_K) to re-draw it",
                 type_name(uint32_t(t.type)));
    auto info = std::make_shared<const TensorInfo>(t);
    if (!redraw) {
      w.add_tensor(t.name, t.shape, t.type, [file, info](ByteSink& out) { out.write(info->data, info->n_bytes); });
      continue;
    }
    w.add_tensor(t.name, t.shape, t.type, [info, salted](ByteSink& out) {
      std::vector<float> row(static_cast<size_t>(info->row_length()));
      std::vector<uint8_t> scratch;
      for (uint64_t r = 0; r < info->n_rows(); ++r) {
        draw_row(*info, salted, r, row.data());
        encode_row(info->type, row.data(), int64_t(row.size()), scratch, out);
      }
    });
  }
  return w;
}

}  // namespace ember::gguf
