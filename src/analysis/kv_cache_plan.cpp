#include "analysis/kv_cache_plan.h"

#include <algorithm>
#include <vector>

#include "gguf/dequantize.h"
#include "util/error.h"
#include "util/f16.h"

namespace ember::analysis {

namespace {

using gguf::TensorType;

// One row of `part` through its type; only `head`'s values kept when head >= 0.
void apply_row(TensorType type, KvRotation rotation, KvPart part, int head, int n_kv_heads,
               int head_dim, float* x) {
  if (type == TensorType::F16) return;
  const int64_t n = int64_t(n_kv_heads) * head_dim;
  thread_local std::vector<float> y;
  thread_local std::vector<uint8_t> blocks;
  y.resize(size_t(n));
  blocks.resize(size_t(gguf::row_bytes(type, uint64_t(n))));
  quantize_kv_row(type, kv_rotation_block(rotation, head_dim, part), x, blocks.data(), y.data(), n);
  if (head < 0) {
    std::copy(y.begin(), y.end(), x);
  } else {
    const size_t b = size_t(head) * size_t(head_dim);
    std::copy(y.begin() + ptrdiff_t(b), y.begin() + ptrdiff_t(b + size_t(head_dim)), x + b);
  }
}

std::string layer_list(const std::vector<int>& ls) {
  std::string s;
  for (size_t i = 0; i < ls.size(); ++i) s += (i ? "," : "") + std::to_string(ls[i]);
  return s;
}

}  // namespace

KvCachePlan KvCachePlan::uniform(int layers, TensorType kt, TensorType vt) {
  KvCachePlan p;
  p.k.assign(size_t(layers), kt);
  p.v.assign(size_t(layers), vt);
  return p;
}

bool KvCachePlan::quantizes(int layer) const {
  return k[size_t(layer)] != TensorType::F16 || v[size_t(layer)] != TensorType::F16;
}

bool KvCachePlan::quantizes_any() const {
  for (size_t l = 0; l < k.size(); ++l)
    if (quantizes(int(l))) return true;
  return false;
}

uint64_t KvCachePlan::bytes_per_position(int n_kv_heads, int head_dim) const {
  const uint64_t n = uint64_t(n_kv_heads) * uint64_t(head_dim);
  uint64_t b = 0;
  for (size_t l = 0; l < k.size(); ++l)
    b += gguf::row_bytes(k[l], n) + gguf::row_bytes(v[l], n);
  return b;
}

double KvCachePlan::bits_per_value(int n_kv_heads, int head_dim) const {
  const double values = 2.0 * double(k.size()) * n_kv_heads * head_dim;
  return values > 0 ? 8.0 * double(bytes_per_position(n_kv_heads, head_dim)) / values : 0;
}

std::string KvCachePlan::label() const {
  // The most common (K, V) pair over the quantized layers names the plan; the layers that
  // differ from it are listed (an override such as "layers 0,5 f16").
  std::vector<std::pair<TensorType, TensorType>> pairs;
  for (size_t l = 0; l < k.size(); ++l) pairs.push_back({k[l], v[l]});
  std::pair<TensorType, TensorType> main = pairs.empty() ? std::pair{TensorType::F16, TensorType::F16} : pairs[0];
  size_t best = 0;
  for (const auto& p : pairs) {
    const size_t c = size_t(std::count(pairs.begin(), pairs.end(), p));
    if (c > best || (c == best && main.first == TensorType::F16 && main.second == TensorType::F16)) {
      best = c;
      main = p;
    }
  }
  auto name = [](TensorType t) { return gguf::type_name(uint32_t(t)); };
  std::string s = "K " + name(main.first) + " / V " + name(main.second);
  std::vector<std::pair<std::pair<TensorType, TensorType>, std::vector<int>>> others;
  for (size_t l = 0; l < pairs.size(); ++l) {
    if (pairs[l] == main) continue;
    auto it = std::find_if(others.begin(), others.end(), [&](const auto& o) { return o.first == pairs[l]; });
    if (it == others.end()) others.push_back({pairs[l], {int(l)}});
    else it->second.push_back(int(l));
  }
  for (const auto& [p, ls] : others) {
    s += std::string(", layer") + (ls.size() > 1 ? "s " : " ") + layer_list(ls) + " ";
    s += p.first == p.second ? name(p.first) : "K " + name(p.first) + " / V " + name(p.second);
  }
  if (head >= 0) s += ", KV head " + std::to_string(head) + " only";
  return s;
}

void KvCachePlan::apply(KvRotation rotation, int layer, int n_kv_heads, int head_dim, float* kr,
                        float* vr) const {
  apply_row(k[size_t(layer)], rotation, KvPart::k, head, n_kv_heads, head_dim, kr);
  apply_row(v[size_t(layer)], rotation, KvPart::v, head, n_kv_heads, head_dim, vr);
}

void KvCachePlan::apply_query(KvRotation rotation, int layer, int head_dim, const float* q, float* out) const {
  if (k[size_t(layer)] == TensorType::F16 || head_dim % 32 != 0) {
    for (int i = 0; i < head_dim; ++i) out[i] = f16_to_f32(f32_to_f16(q[i]));
    return;
  }
  thread_local std::vector<uint8_t> blocks;
  blocks.resize(size_t(gguf::row_bytes(TensorType::Q8_0, uint64_t(head_dim))));
  quantize_kv_row(TensorType::Q8_0, kv_rotation_block(rotation, head_dim, KvPart::k), q, blocks.data(), out,
                  head_dim);
}

void KvCachePlan::apply(KvRotation rotation, model::KvCache& c, int pos_begin, int pos_end) const {
  EMBER_CHECK(int(k.size()) == c.n_layers && int(v.size()) == c.n_layers);
  EMBER_CHECK(pos_begin >= 0 && pos_begin <= pos_end && pos_end <= c.capacity);
  const int H = c.n_kv_heads, D = c.head_dim;
  std::vector<float> kr(size_t(H) * D), vr(kr.size());
  for (int l = 0; l < c.n_layers; ++l) {
    if (!quantizes(l)) continue;
    for (int p = pos_begin; p < pos_end; ++p) {
      for (int h = 0; h < H; ++h)
        for (int d = 0; d < D; ++d) {
          kr[size_t(h) * D + d] = f16_to_f32(c.k_row(l, h, p)[d]);
          vr[size_t(h) * D + d] = f16_to_f32(c.v_row(l, h, p)[d]);
        }
      apply(rotation, l, H, D, kr.data(), vr.data());
      for (int h = 0; h < H; ++h)
        for (int d = 0; d < D; ++d) {
          c.k_row(l, h, p)[d] = f32_to_f16(kr[size_t(h) * D + d]);
          c.v_row(l, h, p)[d] = f32_to_f16(vr[size_t(h) * D + d]);
        }
    }
  }
}

void check_plan(const KvCachePlan& p, int n_layers, int n_kv_heads, int head_dim, const char* where) {
  EMBER_CHECK(int(p.k.size()) == n_layers && int(p.v.size()) == n_layers);
  EMBER_CHECK(p.head < n_kv_heads);
  for (int l = 0; l < n_layers; ++l)
    for (TensorType t : {p.k[size_t(l)], p.v[size_t(l)]})
      if (t != TensorType::F16) check_kv_quantizable(t, n_kv_heads, head_dim, where);
}

}  // namespace ember::analysis
