#pragma once
// Logit fidelity measures shared by the studies (computed in f64, order fixed by index).
// The reference row is the target model's own logits (full prefill), x the candidate's.
#include <cstdint>

namespace ember::map {

struct LogitComparison {
  bool same_argmax = false;  // argmax (first maximum) of both rows equal
  int32_t argmax = -1;       // of the candidate row
  int32_t ref_argmax = -1;   // of the reference row
  double rel_l2 = 0;         // ||x - ref||_2 / ||ref||_2
  double max_abs = 0;        // max |x - ref|
  // KL(softmax(ref) || softmax(x)) in nats, f64 (util/kl.h, the one KL of every report); NaN
  // when a logit is not finite.
  double kl = 0;
  bool bit_identical = false;
};

int32_t first_argmax(const float* x, int n);
LogitComparison compare_logits(const float* x, const float* ref, int n);

}  // namespace ember::map
