#include "map/split.h"

#include <cmath>
#include <set>

#include "util/error.h"
#include "util/hex.h"
#include "util/sha256.h"

namespace ember::map {

std::string prompt_hash(std::span<const int32_t> tokens) {
  Sha256 h;
  for (int32_t t : tokens) {
    uint8_t b[4];
    const uint32_t u = uint32_t(t);
    for (int i = 0; i < 4; ++i) b[i] = uint8_t(u >> (8 * i));
    h.update(b, 4);
  }
  return to_hex(h.finish());
}

const char* split_part_name(SplitPart p) { return p == SplitPart::calib ? "calib" : "eval"; }

uint64_t Rng::below(uint64_t n) {
  EMBER_CHECK(n > 0);
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  for (;;) {
    const uint64_t v = next();
    if (v < limit) return v % n;
  }
}

double Rng::uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }

double Rng::normal() {
  // Box-Muller; u1 in (0, 1] so log is finite.
  const double u1 = 1.0 - uniform();
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

PromptSplit PromptSplit::make(const std::vector<std::string>& prompt_hashes, int n_calib,
                              int n_eval, uint64_t seed) {
  if (n_calib <= 0) fail_field("split", "calibration prompts", "> 0", std::to_string(n_calib));
  if (n_eval <= 0) fail_field("split", "evaluation prompts", "> 0", std::to_string(n_eval));
  std::vector<std::string> distinct;
  std::set<std::string> seen;
  for (const auto& h : prompt_hashes)
    if (seen.insert(h).second) distinct.push_back(h);
  if (distinct.size() < size_t(n_calib) + size_t(n_eval))
    fail_field("split", "distinct prompts",
               "at least " + std::to_string(n_calib + n_eval) + " (calib + eval)",
               std::to_string(distinct.size()));
  Rng rng(seed);
  for (size_t i = distinct.size(); i > 1; --i) {
    const size_t j = size_t(rng.below(i));
    std::swap(distinct[i - 1], distinct[j]);
  }
  PromptSplit s;
  s.seed = seed;
  s.calib.assign(distinct.begin(), distinct.begin() + n_calib);
  s.eval.assign(distinct.begin() + n_calib, distinct.begin() + n_calib + n_eval);
  return s;
}

std::string PromptSplit::hash() const {
  Sha256 h;
  h.update_field("ember.prompt-split.v1");
  h.update_u64(seed);
  h.update_u64(calib.size());
  for (const auto& c : calib) h.update_field(c);
  h.update_u64(eval.size());
  for (const auto& e : eval) h.update_field(e);
  return to_hex(h.finish());
}

bool PromptSplit::is_eval(const std::string& h) const {
  for (const auto& e : eval)
    if (e == h) return true;
  return false;
}

bool PromptSplit::is_calib(const std::string& h) const {
  for (const auto& c : calib)
    if (c == h) return true;
  return false;
}

void PromptSplit::check_fit_prompt(const std::string& h, const std::string& where) const {
  if (is_eval(h))
    fail(where, "evaluation prompt " + h + " may not enter a fit (split " + hash() + ")");
  if (!is_calib(h))
    fail_field(where, "prompt", "a calibration prompt of split " + hash(),
               "unknown prompt " + h);
}

nlohmann::json PromptSplit::to_json() const {
  nlohmann::json j;
  j["seed"] = seed;
  j["calib"] = calib;
  j["eval"] = eval;
  j["split_hash"] = hash();
  return j;
}

PromptSplit PromptSplit::from_json(StrictObject o) {
  PromptSplit s;
  s.seed = o.unsigned_integer("seed", UINT64_MAX);
  std::set<std::string> seen;
  for (const char* part : {"calib", "eval"}) {
    const nlohmann::json& arr = o.array(part);
    for (size_t i = 0; i < arr.size(); ++i) {
      const auto& v = arr[i];
      if (!v.is_string() || !is_hex(v.get<std::string>(), 64))
        fail_field(o.where(), o.element(part, i), "64 lowercase hex digits", v.dump());
      const std::string h = v.get<std::string>();
      if (!seen.insert(h).second)
        fail_field(o.where(), o.element(part, i), "each prompt in exactly one place", "duplicate prompt " + h);
      (std::string(part) == "calib" ? s.calib : s.eval).push_back(h);
    }
  }
  if (s.calib.empty()) fail_field(o.where(), o.field("calib"), "at least one prompt", "none");
  const std::string want = o.string("split_hash", 128);
  o.done();
  if (want != s.hash()) fail_field(o.where(), o.field("split_hash"), s.hash(), want);
  return s;
}

std::pair<int, int> parse_split_counts(const std::string& text, const std::string& where) {
  const auto colon = text.find(':');
  auto parse = [&](const std::string& part) -> int {
    if (part.empty() || part.size() > 7) fail_field(where, "--split", "N:M with counts", text);
    for (char c : part)
      if (c < '0' || c > '9') fail_field(where, "--split", "N:M with counts", text);
    return std::stoi(part);
  };
  if (colon == std::string::npos) fail_field(where, "--split", "N:M", text);
  return {parse(text.substr(0, colon)), parse(text.substr(colon + 1))};
}

}  // namespace ember::map
