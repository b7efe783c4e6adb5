#include "analysis/compare_thresholds.h"

#include <cmath>

#include "util/error.h"

namespace ember::analysis {

namespace {

void check_finite(const std::optional<double>& v, const char* flag) {
  if (v && !std::isfinite(*v)) fail_field("kv compare", flag, "a finite number", std::to_string(*v));
}

}  // namespace

void validate_thresholds(const Thresholds& t) {
  check_finite(t.min_cosine, "--min-cosine");
  check_finite(t.max_mse, "--max-mse");
  check_finite(t.min_r2, "--min-r2");
  check_finite(t.max_abs, "--max-abs");
  if (t.min_cosine && (*t.min_cosine < -1 || *t.min_cosine > 1)) {
    fail_field("kv compare", "--min-cosine", "a value in [-1, 1]", std::to_string(*t.min_cosine));
  }
  if (t.max_mse && *t.max_mse < 0) {
    fail_field("kv compare", "--max-mse", "a value >= 0", std::to_string(*t.max_mse));
  }
  if (t.max_abs && *t.max_abs < 0) {
    fail_field("kv compare", "--max-abs", "a value >= 0", std::to_string(*t.max_abs));
  }
  if (t.min_r2 && *t.min_r2 > 1) {
    fail_field("kv compare", "--min-r2", "a value <= 1", std::to_string(*t.min_r2));
  }
}

std::vector<Failure> find_failures(const KvMetrics& m, const Thresholds& t) {
  std::vector<Failure> out;
  for (int layer = 0; layer < m.n_layers; ++layer) {
    for (int head = 0; head < m.n_kv_heads; ++head) {
      for (KvPart part : {KvPart::k, KvPart::v}) {
        const PartMetrics& pm = m.at(layer, head).part(part);
        auto check = [&](const char* name, const std::optional<double>& value,
                         const std::optional<double>& limit, bool is_min) {
          if (!limit) return;
          const bool bad = !value || (is_min ? *value < *limit : *value > *limit);
          if (bad) out.push_back(Failure{layer, head, part, name, value, *limit});
        };
        check("cosine", pm.cosine, t.min_cosine, true);
        check("mse", pm.mse, t.max_mse, false);
        check("r2", pm.r2, t.min_r2, true);
        check("max_abs", pm.max_abs, t.max_abs, false);
      }
    }
  }
  return out;
}

}  // namespace ember::analysis
