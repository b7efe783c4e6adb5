#pragma once
// The exact-replay gate's verdict: native[N,V] == concat(boundary[1,V], replay[N-1,V]),
// compared as f32 bit patterns (no tolerance; -0.0 != +0.0, a NaN equals only the same NaN).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kv/strict_json.h"

namespace ember::kv {

struct LogitsMismatch {
  int row = 0;       // row of native (0 = the boundary row)
  int column = 0;    // token id
  uint32_t native_bits = 0, resumed_bits = 0;
  std::string source;  // "boundary" or "replay"
};

struct GateVerdict {
  bool pass = false;
  int rows = 0, vocab = 0;
  uint64_t differing_values = 0;
  std::optional<LogitsMismatch> first_mismatch;  // row-major first
  std::string shape_error;  // non-empty when the files' sizes do not fit [N,V]
};

// Reads nothing: compares buffers of raw little-endian f32. `n` is the native row count.
GateVerdict compare_replay_logits(const std::vector<uint8_t>& native, const std::vector<uint8_t>& boundary,
                                  const std::vector<uint8_t>& replay, int n);

ordered_json verdict_json(const GateVerdict& v);

}  // namespace ember::kv
