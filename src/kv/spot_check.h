#pragma once
// `kv verify --spot K`: re-decodes K positions of a native state from its own stored prefix and
// checks them bit for bit (docs/cli-kv-snapshot.md, "Spot check").
//
// canonical-v1 makes ember's decode of token p over rows [0, p) equal its prefill of row p, on
// any thread count and SIMD path (docs/numerics.md). So for a cache the manifest's model
// computed, every recomputed K/V row equals the stored one, and the logits after the last
// position hash to proof.boundary_logits_sha256. A row the stored prefix cannot have produced
// (a flipped bit, blocks swapped, another prompt's or another model's rows, a lossy round trip,
// a truncation padded back) differs at the position itself or, through attention, at a sampled
// position after it; the last position is always sampled, and it reads every row before it.
// Checksums cannot see such a cache when the bytes were sealed as they are; this check can, for
// K decode steps instead of a prefill. Built on kv/recompute_rows.h.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kv/snapshot.h"
#include "model/engine.h"

namespace ember::kv {

// The first element that differs in one recomputed position, in check order: layer, kv_head,
// K before V, dim.
struct SpotRowDiff {
  int position = 0;
  int layer = 0;
  int kv_head = 0;
  bool values = false;  // false: the K row; true: the V row
  int dim = 0;
  uint16_t stored = 0, recomputed = 0;  // f16 bit patterns
  std::string describe() const;  // "K row of layer 2, kv_head 1, position 37 (dim 5: stored 0x3c00, recomputed 0x3c01)"
};

struct SpotPosition {
  int position = 0;
  std::optional<SpotRowDiff> diff;  // none: every row of the position is the stored one
};

struct SpotReport {
  std::vector<SpotPosition> positions;  // ascending; the last is P - 1
  // The logits after P - 1 against proof.boundary_logits_sha256: "ok", "differs" or
  // "not-recorded" (a version 1 manifest, or a state no ember prefill produced).
  std::string logits = "not-recorded";
  std::string logits_expected, logits_found;  // hex SHA-256 (found: always computed)
  int32_t resume_found = -1;  // argmax of the recomputed boundary logits (ties: lowest id)
  bool resume_ok = true;      // resume_found == manifest.resume.token
  // The recorded witness (proof.witness_*, kv/witness.h) run again over the stored cache: "ok",
  // "differs" or "not-recorded" (a manifest before version 3, or a producer that recorded none).
  std::string witness = "not-recorded";
  int witness_length = 0;
  // When it differs: the first layer whose attention output differs, the layer the changed rows
  // are in (-1: only the logits differ).
  int witness_first_layer = -1;
  // The first position whose rows differ (the lowest), or none.
  const SpotRowDiff* first_diff() const;
  bool ok() const { return !first_diff() && witness != "differs" && logits != "differs" && resume_ok; }
  // When the witness differs: what differs, naming the layer ("" otherwise).
  std::string witness_failure() const;
  // One line: "ok: 4 positions ..." or the first failure, naming layer, kv_head and position.
  std::string summary() const;
};

// Recomputes spot_positions(P, k, seed) of `cache` (the state `m` describes: its tokens are
// m.prefix.tokens; the caller checked that `engine` is the manifest's target, check_compatible)
// and compares every K/V row at each, then the boundary logits, then runs the recorded witness
// (if any) over the cache as stored. Every sampled position is evaluated (no early exit): the
// cost of a clean check is the cost of any check.
SpotReport spot_check(model::Engine& engine, const SnapshotManifest& m, const model::KvCache& cache, int k,
                      uint64_t seed);

}  // namespace ember::kv
