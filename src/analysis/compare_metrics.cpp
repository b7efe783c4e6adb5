#include "analysis/compare_metrics.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"
#include "util/f16.h"
#include "util/thread_pool.h"

namespace ember::analysis {

const char* part_name(KvPart p) { return p == KvPart::k ? "k" : "v"; }

// Exact for every finite f16 (normal and subnormal): the 15 magnitude bits shifted into an
// f32 give the value scaled by 2^-112, and the multiply by 2^112 is exact. Branch-free and
// table-free (a 65536-entry table thrashes the cache on real K/V). Inf/NaN map to finite
// garbage, which never reaches a result: metrics are dropped when non_finite > 0.
double f16_value(uint16_t h) {
  const uint32_t x = (uint32_t(h & 0x8000u) << 16) | (uint32_t(h & 0x7fffu) << 13);
  return double(bits_to_f32(x) * 0x1p112f);
}

namespace {

inline bool f16_non_finite(uint16_t h) { return (h & 0x7c00u) == 0x7c00u; }

}  // namespace

PartMetrics part_metrics(const uint16_t* left, const uint16_t* right, size_t n, bool r2) {
  PartMetrics m;
  m.elements = n;
  // One accumulator per quantity, element order: the fixed summation order of the contract.
  double ll = 0, rr = 0, lr = 0, ss_res = 0, sum_r = 0, max_abs = 0;
  uint64_t mismatches = 0, non_finite = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint16_t hl = left[i], hr = right[i];
    mismatches += hl != hr;
    non_finite += f16_non_finite(hl) || f16_non_finite(hr);
    const double a = f16_value(hl), b = f16_value(hr);
    const double d = b - a;  // exact: both are f16 values
    ll += a * a;
    rr += b * b;
    lr += a * b;
    ss_res += d * d;
    sum_r += b;
    max_abs = std::max(max_abs, std::fabs(d));
  }
  m.mismatches = mismatches;
  m.non_finite = non_finite;
  if (non_finite != 0 || n == 0) return m;
  if (ll == 0 && rr == 0) {
    m.cosine = 1.0;  // two zero vectors are equal
  } else if (ll == 0 || rr == 0) {
    m.cosine = 0.0;  // no direction to agree with
  } else {
    // sqrt(ll * rr), not sqrt(ll) * sqrt(rr): for identical sides sqrt(ll * ll) == ll exactly,
    // so a self-comparison gives cosine 1 exactly. Clamped against rounding past +-1.
    m.cosine = std::clamp(lr / std::sqrt(ll * rr), -1.0, 1.0);
  }
  m.mse = ss_res / double(n);
  m.max_abs = max_abs;
  if (r2) {
    const double mean_r = sum_r / double(n);
    double ss_tot = 0;
    for (size_t i = 0; i < n; ++i) {
      const double c = f16_value(right[i]) - mean_r;
      ss_tot += c * c;
    }
    if (ss_tot > 0) {
      m.r2 = 1.0 - ss_res / ss_tot;
    } else if (ss_res == 0) {
      m.r2 = 1.0;  // RIGHT is constant and LEFT equals it
    }  // else undefined: RIGHT is constant and LEFT differs (reported as null)
  }
  return m;
}

bool KvMetrics::identical() const {
  for (const HeadMetrics& h : heads) {
    if (h.k.mismatches != 0 || h.v.mismatches != 0) return false;
  }
  return true;
}

KvMetrics compare_caches(const model::KvCache& left, const model::KvCache& right, bool r2,
                         ThreadPool* pool) {
  EMBER_CHECK(left.n_layers == right.n_layers && left.n_kv_heads == right.n_kv_heads &&
              left.head_dim == right.head_dim && left.n_pos == right.n_pos);
  EMBER_CHECK(left.n_pos >= 0 && left.n_pos <= left.capacity && right.n_pos <= right.capacity);
  KvMetrics out;
  out.n_layers = left.n_layers;
  out.n_kv_heads = left.n_kv_heads;
  out.head_dim = left.head_dim;
  out.n_pos = left.n_pos;
  out.r2 = r2;
  out.heads.resize(size_t(left.n_layers) * size_t(left.n_kv_heads));
  const size_t n = size_t(left.n_pos) * size_t(left.head_dim);
  // Task t covers (layer, head) = t / 2 and part t % 2; each writes only its own slot.
  const int64_t n_tasks = int64_t(out.heads.size()) * 2;
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t lh = t / 2;
      const int layer = int(lh / left.n_kv_heads), head = int(lh % left.n_kv_heads);
      HeadMetrics& slot = out.heads[size_t(lh)];
      if (t % 2 == 0) {
        slot.k = part_metrics(left.k_row(layer, head, 0), right.k_row(layer, head, 0), n, r2);
      } else {
        slot.v = part_metrics(left.v_row(layer, head, 0), right.v_row(layer, head, 0), n, r2);
      }
    }
  };
  if (pool != nullptr && pool->size() > 1) {
    pool->parallel_for(n_tasks, run);
  } else {
    run(0, n_tasks);
  }
  return out;
}

}  // namespace ember::analysis
