#include "gguf/synth_outliers.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "gguf/arch.h"
#include "gguf/random.h"
#include "gguf/synth.h"
#include "gguf/synth_vocab.h"
#include "util/error.h"

namespace ember::gguf {
namespace {

constexpr const char* kWhere = "synth";

std::string num(double v) {
  char b[48];
  std::snprintf(b, sizeof b, "%.10g", v);
  return b;
}

// A finite double spelled in full (no trailing characters), else nullopt-like false.
bool parse_double(const std::string& s, double* out) {
  if (s.empty() || s.find_first_of(" \t") != std::string::npos) return false;
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && std::isfinite(*out);
}

// "blk.N.rest" -> N and rest; false for a global tensor.
bool split_block(const std::string& name, int64_t* layer, std::string* rest) {
  if (name.rfind("blk.", 0) != 0) return false;
  const size_t dot = name.find('.', 4);
  if (dot == std::string::npos) return false;
  *layer = std::strtoll(name.c_str() + 4, nullptr, 10);
  *rest = name.substr(dot + 1);
  return true;
}

}  // namespace

OutlierSpec OutlierSpec::parse(const std::string& text, const char* flag) {
  OutlierSpec s;
  bool seen_pairs = false, seen_scale = false, seen_sink = false;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t eq = item.find('=');
    const std::string key = eq == std::string::npos ? item : item.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
    if (eq == std::string::npos || (key != "pairs" && key != "scale" && key != "sink"))
      fail_field(kWhere, flag, "comma-separated pairs=N, scale=S, sink=G", "'" + item + "' in '" + text + "'");
    bool& seen = key == "pairs" ? seen_pairs : key == "scale" ? seen_scale : seen_sink;
    if (seen) fail_field(kWhere, flag, "each key once", "'" + key + "' twice in '" + text + "'");
    seen = true;
    double v = 0;
    if (key == "pairs") {
      if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos || value.size() > 4 ||
          std::stoi(value) < 1 || std::stoi(value) > 1024)
        fail_field(kWhere, flag, "pairs=N with N an integer in 1..1024", "'" + item + "'");
      s.pairs = std::stoi(value);
    } else if (key == "scale") {
      if (!parse_double(value, &v) || !(v > 1) || v > 1e6)
        fail_field(kWhere, flag, "scale=S with S a finite number > 1 and <= 1e6", "'" + item + "'");
      s.scale = v;
    } else {
      if (!parse_double(value, &v) || v < 0 || v > 100)
        fail_field(kWhere, flag, "sink=G with G a finite number in [0, 100] (nats)", "'" + item + "'");
      s.sink = v;
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (seen_pairs != seen_scale)
    fail_field(kWhere, flag, seen_pairs ? "scale=S beside pairs=N" : "pairs=N beside scale=S",
               "'" + text + "'");
  if (!s.active()) fail_field(kWhere, flag, "pairs=N,scale=S and/or sink=G with G > 0", "'" + text + "'");
  return s;
}

std::string OutlierSpec::text() const {
  std::string t;
  if (pairs > 0) t = "pairs=" + std::to_string(pairs) + ",scale=" + num(scale);
  if (sink > 0) t += (t.empty() ? "" : ",") + std::string("sink=") + num(sink);
  return t;
}

bool OutlierPlan::is_outlier(int64_t layer, int64_t g, int64_t d) const {
  if (spec.pairs == 0) return false;
  for (int i : pair[size_t(layer * kv_heads + g)])
    if (d == dim0(i) || d == dim1(i)) return true;
  return false;
}

OutlierPlan plan_outliers(const SynthSpec& s) {
  OutlierPlan p;
  p.spec = s.outliers;
  p.hidden = s.hidden, p.heads = s.heads, p.kv_heads = s.kv_heads, p.head_dim = s.head_dim;
  const ArchInfo& info = require_arch(s.arch, kWhere, "--arch");
  p.neox = info.rope_layout == RopeLayout::neox;
  if (s.qk_norm)
    fail_field(kWhere, "--outliers", "an architecture without per-head Q/K norm (its norm would undo the scale)",
               "arch " + s.arch);
  const int64_t free_pairs = s.head_dim / 2 - 1;  // the lowest-frequency pair is reserved for the sink
  if (p.spec.pairs > free_pairs)
    fail_field(kWhere, "--outliers",
               "pairs <= head_dim/2 - 1 = " + std::to_string(free_pairs) + " (the lowest-frequency pair is the sink's)",
               "pairs=" + std::to_string(p.spec.pairs));
  if (p.spec.pairs > 0) {
    // Per (layer, KV head): a partial Fisher-Yates draw of `pairs` of the pairs [0, hd/2 - 1).
    for (int64_t l = 0; l < s.layers; ++l)
      for (int64_t g = 0; g < s.kv_heads; ++g) {
        std::vector<int> all(static_cast<size_t>(free_pairs));
        for (int64_t i = 0; i < free_pairs; ++i) all[size_t(i)] = int(i);
        SplitMix64 rng(derive_seed(s.seed, "ember.outliers.pairs", uint64_t(l * s.kv_heads + g)));
        for (int i = 0; i < p.spec.pairs; ++i) {
          const size_t j = size_t(i) + size_t(rng.next() % uint64_t(free_pairs - i));
          std::swap(all[size_t(i)], all[j]);
        }
        p.pair.emplace_back(all.begin(), all.begin() + p.spec.pairs);
      }
  }
  if (p.spec.sink > 0) {
    if (!s.qkv_bias)
      fail_field(kWhere, "--outliers", "sink=G with Q/K biases (qwen2, or llama with --qkv-bias)", "no biases");
    SplitMix64 rng(derive_seed(s.seed, "ember.outliers.sink"));
    p.r_k = int64_t(rng.next() % uint64_t(s.hidden));
    const int last = int(s.head_dim / 2 - 1);
    p.u = p.dim0(last);
    p.u2 = p.dim1(last);
    // BOS's embedding carries a_bos = 16 sqrt(hidden) on r_k, so its normalised input is
    // almost all r_k (x_rk ~ sqrt(hidden)) and its own Q/K/V are small; no other token has
    // r_k, no layer writes it and no other weight reads it. Every query head has the bias
    // q_bias at u (whatever the token and layer), every KV head reads r_k into u with gamma:
    // the BOS key's score exceeds any other key's by q_bias * gamma * sqrt(hidden) /
    // sqrt(head_dim) = sink nats, times cos(t * theta_low) at query position t (the lowest
    // frequency pair: under 1e-3 rad per position for head_dim 64 and theta >= 10000).
    p.a_bos = 16 * std::sqrt(double(s.hidden));
    const double side = std::sqrt(p.spec.sink * std::sqrt(double(s.head_dim)));
    p.q_bias = side;
    p.gamma = side / std::sqrt(double(s.hidden));
    p.bos = synth_vocab(s.vocab).bos;
  }
  return p;
}

void shape_outlier_row(const OutlierPlan& p, const std::string& name, uint64_t row, int64_t n, float* out) {
  const bool sink = p.spec.sink > 0;
  // The sink's residual dim is written by BOS's embedding alone and read only by the sink's
  // own K weights: zero it as an input of every other matrix.
  auto zero_sink_input = [&] {
    if (sink) out[p.r_k] = 0;
  };
  if (name == "token_embd.weight") {
    if (sink) out[p.r_k] = int64_t(row) == p.bos ? float(p.a_bos) : 0.0f;
    return;
  }
  if (name == "output.weight") return zero_sink_input();
  int64_t layer = 0;
  std::string rest;
  if (!split_block(name, &layer, &rest)) return;
  const int64_t group = p.heads / p.kv_heads;
  // One output channel o of Q (its KV head: o / hd / group) or K (o / hd), with head dim d.
  auto shape_channel = [&](bool is_q, int64_t o, float* values, int64_t count, bool is_bias) {
    const int64_t d = o % p.head_dim, head = o / p.head_dim;
    const int64_t g = is_q ? head / group : head;
    if (sink && (d == p.u || d == p.u2)) {
      for (int64_t i = 0; i < count; ++i) values[i] = 0;
      if (d == p.u && is_q && is_bias) values[0] = float(p.q_bias);
      if (d == p.u && !is_q && !is_bias) values[p.r_k] = float(p.gamma);
      return;
    }
    if (p.is_outlier(layer, g, d)) {
      const float f = float(is_q ? 1.0 / p.spec.scale : p.spec.scale);
      for (int64_t i = 0; i < count; ++i) values[i] *= f;
    }
  };
  if (rest == "attn_q.weight" || rest == "attn_k.weight") {
    zero_sink_input();
    shape_channel(rest == "attn_q.weight", int64_t(row), out, n, false);
  } else if (rest == "attn_q.bias" || rest == "attn_k.bias") {
    for (int64_t o = 0; o < n; ++o) shape_channel(rest == "attn_q.bias", o, out + o, 1, true);
  } else if (rest == "attn_v.weight" || rest == "ffn_gate.weight" || rest == "ffn_up.weight") {
    zero_sink_input();
  } else if (rest == "attn_output.weight" || rest == "ffn_down.weight") {
    if (sink && int64_t(row) == p.r_k)
      for (int64_t i = 0; i < n; ++i) out[i] = 0;  // no layer writes the sink's dim
  } else if (rest == "attn_norm.weight") {
    if (sink) out[p.r_k] = 1;  // so that BOS's x_rk is exactly the normalised constant
  }
}

}  // namespace ember::gguf
