#include "model/rope.h"

#include <cmath>

#include "util/error.h"

namespace ember::model {

namespace {
// The llama3 divisor of a pair with base inverse frequency `freq` (Hugging Face
// `_compute_llama3_parameters`, as llama.cpp's converter writes it into rope_freqs, f32).
float llama3_divisor(const RopeScaling& s, double freq) {
  const double pi = 3.14159265358979323846;
  const double low_wavelen = double(s.original_context) / s.low_freq_factor;
  const double high_wavelen = double(s.original_context) / s.high_freq_factor;
  const double wavelen = 2 * pi / freq;
  if (wavelen < high_wavelen) return 1.0f;
  if (wavelen > low_wavelen) return s.factor;
  const double smooth = (double(s.original_context) / wavelen - s.low_freq_factor) /
                        (double(s.high_freq_factor) - s.low_freq_factor);
  return float(1.0 / ((1 - smooth) / s.factor + smooth));
}
}  // namespace

RopeTable::RopeTable(const ModelConfig& c) : head_dim_(c.head_dim), layout_(c.rope_layout) {
  EMBER_CHECK(head_dim_ > 0 && head_dim_ % 2 == 0);
  const int half = head_dim_ / 2;
  const auto& s = c.rope_scaling;
  EMBER_CHECK(s.freq_factors.empty() || int(s.freq_factors.size()) == half);
  inv_freq_.resize(size_t(half));
  for (int i = 0; i < half; ++i) {
    const double freq = std::pow(double(c.rope_theta), -2.0 * i / head_dim_);
    double divisor = 1.0;
    if (!s.freq_factors.empty()) divisor = s.freq_factors[size_t(i)];
    else if (s.type == "linear") divisor = s.factor;
    else if (s.type == "llama3") divisor = llama3_divisor(s, freq);
    inv_freq_[size_t(i)] = freq / divisor;
  }
}

void RopeTable::cos_sin(int pos, float* cos, float* sin) const {
  for (size_t i = 0; i < inv_freq_.size(); ++i) {
    const double angle = double(pos) * inv_freq_[i];
    cos[i] = float(std::cos(angle));
    sin[i] = float(std::sin(angle));
  }
}

void RopeTable::rotate(const float* cos, const float* sin, float* head, bool inverse) const {
  const int half = head_dim_ / 2;
  const int stride = layout_ == RopeLayout::normal ? 2 : 1;   // index step between pairs
  const int offset = layout_ == RopeLayout::normal ? 1 : half;  // partner of element i0
  for (int i = 0; i < half; ++i) {
    const int i0 = i * stride;
    const float c = cos[i];
    const float s = inverse ? -sin[i] : sin[i];
    const float x0 = head[i0], x1 = head[i0 + offset];
    head[i0] = x0 * c - x1 * s;
    head[i0 + offset] = x0 * s + x1 * c;
  }
}

void apply_rope(const ModelConfig& config, int pos, float* head, bool inverse) {
  const RopeTable table(config);
  std::vector<float> c(size_t(config.head_dim / 2)), s(c.size());
  table.cos_sin(pos, c.data(), s.data());
  table.rotate(c.data(), s.data(), head, inverse);
}

}  // namespace ember::model
