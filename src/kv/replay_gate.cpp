#include "kv/replay_gate.h"

#include <cstring>

#include "util/f16.h"

namespace ember::kv {

GateVerdict compare_replay_logits(const std::vector<uint8_t>& native, const std::vector<uint8_t>& boundary,
                                  const std::vector<uint8_t>& replay, int n) {
  GateVerdict v;
  v.rows = n;
  if (n < 2 || boundary.empty() || boundary.size() % 4 != 0) {
    v.shape_error = "boundary logits: expected a non-empty f32 row, found " + std::to_string(boundary.size()) + " bytes";
    return v;
  }
  const size_t V = boundary.size() / 4;
  v.vocab = int(V);
  if (native.size() != size_t(n) * V * 4) {
    v.shape_error = "native logits: expected " + std::to_string(n) + " x " + std::to_string(V) +
                    " f32, found " + std::to_string(native.size()) + " bytes";
    return v;
  }
  if (replay.size() != size_t(n - 1) * V * 4) {
    v.shape_error = "replay logits: expected " + std::to_string(n - 1) + " x " + std::to_string(V) +
                    " f32, found " + std::to_string(replay.size()) + " bytes";
    return v;
  }
  for (size_t row = 0; row < size_t(n); ++row) {
    const uint8_t* other = row == 0 ? boundary.data() : replay.data() + (row - 1) * V * 4;
    const uint8_t* nat = native.data() + row * V * 4;
    for (size_t c = 0; c < V; ++c) {
      uint32_t a, b;
      std::memcpy(&a, nat + c * 4, 4);
      std::memcpy(&b, other + c * 4, 4);
      if (a == b) continue;
      ++v.differing_values;
      if (!v.first_mismatch)
        v.first_mismatch = LogitsMismatch{int(row), int(c), a, b, row == 0 ? "boundary" : "replay"};
    }
  }
  v.pass = v.differing_values == 0;
  return v;
}

ordered_json verdict_json(const GateVerdict& v) {
  ordered_json j;
  j["result"] = v.pass ? "pass" : "fail";
  j["rows"] = v.rows;
  j["vocab"] = v.vocab;
  j["comparison"] = "f32 bit equality, no tolerance";
  j["differing_values"] = v.differing_values;
  if (!v.shape_error.empty()) j["shape_error"] = v.shape_error;
  if (v.first_mismatch) {
    const auto& m = *v.first_mismatch;
    char nb[16], rb[16];
    std::snprintf(nb, sizeof nb, "0x%08x", m.native_bits);
    std::snprintf(rb, sizeof rb, "0x%08x", m.resumed_bits);
    j["first_mismatch"] = {{"row", m.row}, {"column", m.column}, {"source", m.source},
                           {"native_bits", nb}, {"resumed_bits", rb},
                           {"native_value", double(bits_to_f32(m.native_bits))},
                           {"resumed_value", double(bits_to_f32(m.resumed_bits))}};
  } else {
    j["first_mismatch"] = nullptr;
  }
  return j;
}

}  // namespace ember::kv
