#pragma once
// The frozen calibration/evaluation split. A prompt is identified by the SHA-256 of its token
// ids (int32 little-endian, BOS included), so the split is about what a model actually saw,
// not about how the text was spelled. Once a split is made its hash is recorded in every
// calibration set and mapper built from it; a fit checks every prompt it is handed against the
// split and refuses any evaluation prompt (and any prompt the split does not know).
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/json_fields.h"

namespace ember::map {

// Hex SHA-256 of the token ids as int32 little-endian.
std::string prompt_hash(std::span<const int32_t> tokens);

enum class SplitPart { calib, eval };
const char* split_part_name(SplitPart p);

struct PromptSplit {
  uint64_t seed = 0;
  std::vector<std::string> calib;  // prompt hashes, in calibration order
  std::vector<std::string> eval;   // prompt hashes, in evaluation order

  // Deterministic split of distinct prompts: duplicates (same token ids) are collapsed first
  // (keeping the first occurrence) so one prompt can never sit on both sides; the distinct
  // prompts are shuffled by a seeded Fisher-Yates over mt19937_64 (portable: no std
  // distributions) and the first n_calib go to calib, the next n_eval to eval. Error if there
  // are fewer than n_calib + n_eval distinct prompts.
  static PromptSplit make(const std::vector<std::string>& prompt_hashes, int n_calib, int n_eval,
                          uint64_t seed);

  // SHA-256 over ("ember.prompt-split.v1", seed, each calib hash, each eval hash), all as
  // length-prefixed fields: the identity recorded by calibration sets, mappers and receipts.
  std::string hash() const;
  bool is_eval(const std::string& h) const;
  bool is_calib(const std::string& h) const;
  // The fit gate: Error unless h is a calibration prompt of this split. An evaluation prompt
  // is refused by name ("evaluation prompt ... may not enter a fit").
  void check_fit_prompt(const std::string& h, const std::string& where) const;

  nlohmann::json to_json() const;
  // Validates: hashes are 64 lowercase hex, no duplicates within or across the two parts.
  // Strict: exactly seed, calib, eval and split_hash (errors name o's file and path).
  static PromptSplit from_json(StrictObject o);
};

// Parses "N:M" (counts of calibration and evaluation prompts).
std::pair<int, int> parse_split_counts(const std::string& text, const std::string& where);

// mt19937_64-based helpers shared by the split and the study (portable across standard
// libraries: only the engine's raw output is used).
class Rng {
 public:
  explicit Rng(uint64_t seed) : mt_(seed) {}
  uint64_t next() { return mt_(); }
  // Uniform in [0, n) by rejection (no modulo bias). n > 0.
  uint64_t below(uint64_t n);
  // Uniform in [0, 1) with 53 random bits.
  double uniform();
  // Standard normal (Box-Muller over uniform(); one value per call, deterministic).
  double normal();

 private:
  std::mt19937_64 mt_;
};

}  // namespace ember::map
