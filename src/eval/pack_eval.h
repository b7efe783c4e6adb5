#pragma once
// `ember pack eval`: a software-run evaluation of a DOMCAP1 capability pack. Each probe that
// carries a check (expect.check, schemas/domcap1.schema.json) is run twice with the engine,
// greedy and deterministic (canonical-v1): once on its prompt alone, once with the briefing
// injected exactly as `ember run --pack` injects it (contract::inject_briefing: briefing, a
// blank line, the prompt; the briefing and the blank line encoded as plain text). The result
// is an ember.pack-eval-receipt.v1 (schemas/pack-eval-receipt.schema.json): what ran, each
// probe's verdict with and without, and the totals with the briefing's byte and token cost.
// Same inputs, same bytes. docs/contracts.md ("Running a pack's probes").
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "contract/pack.h"
#include "eval/probe_check.h"
#include "model/engine.h"
#include "tokenizer/tokenizer.h"

namespace ember::eval {

struct PackEvalOptions {
  int max_tokens = 32;     // selection steps per run (1..65536); generation stops earlier at EOS
  bool add_bos = true;     // prepend BOS to each prompt (the tokenizer's default)
  std::string model_name;  // receipt model.name (the file name); empty: omitted
};

struct EvalProbe {
  std::string id, prompt;
  ProbeCheck check;
};

// The probes of a checked pack (check_pack ok) that carry expect.check, in pack order, each
// check compiled; the ids of the others (which only name a tool call or several strings, and
// are not software-checkable) in *skipped. Error naming the pack and the probe when a check
// is refused, or when no probe carries one.
std::vector<EvalProbe> checked_probes(const contract::PackReport& pack, std::vector<std::string>* skipped);

struct PackEvalResult {
  nlohmann::ordered_json receipt;    // valid against pack-eval-receipt.schema.json
  std::vector<std::string> skipped;  // probe ids without a check
};

// Validates the pack (contract::load_validated_pack: schema, every tool against `allow`,
// briefing bounds in characters and in tokens of `tokenizer`), compiles its checks, checks
// that every run fits the engine's positions, and only then runs the probes. Error naming
// the pack and the first violation; the receipt is validated against its schema before it is
// returned. The engine's model and `tokenizer` must belong together (cli::load_model checks).
PackEvalResult evaluate_pack(const std::string& pack_path, const contract::ToolAllowlist& allow,
                             model::Engine& engine, const tok::Tokenizer& tokenizer,
                             const PackEvalOptions& options);

}  // namespace ember::eval
