#pragma once
// `ember study kv-quant --budget kl<=X[,top1>=Y]`: the cheapest llama.cpp cache configuration
// that keeps the next-token distribution within a budget, chosen on one half of the prompts
// and confirmed on the other, written as a sealed (optionally signed) certificate that
// `ember contract validate` checks (schemas/kv-quant-certificate.schema.json,
// docs/kv-quantization.md).
//
// Candidates: every (K type, V type) pair over f16 and the study's types, each for the whole
// cache and with the first and last layers kept at f16 (models of 3 or more layers), ordered by
// the bytes one position takes in llama.cpp's cache (then K+V KL is not looked at: bytes decide,
// ties keep the listed order). Prompts with an even index (0, 2, ...) choose, odd ones are
// held out. In order of bytes, each candidate is measured on the choosing prompts; the first
// that meets the budget there is measured on the held-out prompts; if it meets the budget
// there too it is the choice, else the search goes on (the candidates rejected on held-out
// prompts are recorded). K f16 / V f16 meets every budget (its KL is 0 and top-1 1: the
// engine is deterministic), so there always is a choice; it may be "do not quantize".
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/kv_cache_plan.h"
#include "analysis/kv_quant_study.h"

namespace ember::analysis {

struct KvBudget {
  double kl_max = 0;              // mean KL(native || quantized) <= kl_max, nats
  std::optional<double> top1_min;  // top-1 agreement >= top1_min, in [0, 1]
  std::string text;               // as the user wrote it
};
// "kl<=X" or "kl<=X,top1>=Y" (X >= 0 finite, Y in [0, 1]); Error naming `where` and `flag`.
KvBudget parse_kv_budget(const std::string& s, const char* where, const char* flag);

struct KvBudgetFigures {
  int prompts = 0;
  int64_t steps = 0;
  double kl_mean = 0, kl_p99 = 0, kl_max = 0, top1 = 0, dnll = 0;
  bool meets(const KvBudget& b) const;
};

struct KvBudgetCandidate {
  KvCachePlan plan;
  uint64_t bytes_per_position = 0;
  double bits_per_value = 0;
  KvBudgetFigures choose;                 // measured on the choosing prompts
  std::optional<KvBudgetFigures> held_out;  // measured only when it met the budget on them
};

struct KvBudgetResult {
  KvBudget budget;
  KvQuantStudyOptions options;  // mode, rotation, continuation, top-k, types
  std::string model_identity, engine_fingerprint;
  int n_layers = 0, n_kv_heads = 0, head_dim = 0;
  int prompts = 0, skipped = 0;  // usable prompts; too short
  std::vector<KvBudgetCandidate> tried;  // in the order measured
  size_t chosen = 0;                     // index into tried
  uint64_t f16_bytes_per_position = 0;   // K f16 / V f16, for the saving
  std::string table() const;
};

KvBudgetResult run_kv_quant_budget(model::Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                                   const KvQuantStudyOptions& options, const KvBudget& budget);

// What the certificate says about its inputs beyond the result: the files as named by the
// user (for humans, not identity), the prompt lines' hash and count, the producer.
struct KvCertificateInputs {
  std::string model_name, prompts_name, prompts_sha256, ember_version;
  int prompt_lines = 0;  // lines read (--limit applied), before the length filter
};

inline constexpr const char* kKvQuantCertificateFormat = "ember.kv-quant-certificate.v1";

// The certificate (format ember.kv-quant-certificate.v1), sealed: "seal" = kv::manifest_seal
// of the rest; signed with the Ed25519 private key at `sign_key_pem` when not empty.
nlohmann::ordered_json kv_quant_certificate(const KvBudgetResult& r, const KvCertificateInputs& in,
                                            const std::string& sign_key_pem);

}  // namespace ember::analysis
