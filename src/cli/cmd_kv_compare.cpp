// ember kv compare | perturb: thin over src/analysis/compare.h and src/analysis/perturb.h.
#include <cstdio>
#include <memory>
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/limits.h"
#include "cli/store_flags.h"
#include "cli/trust_flags.h"
#include "cli/model_loader.h"
#include "cli/version.h"
#include "analysis/compare.h"
#include "analysis/compare_load.h"
#include "analysis/perturb.h"
#include "analysis/report_html.h"
#include "gguf/quantize.h"
#include "gguf/types.h"
#include "kv/state.h"
#include "model/engine.h"
#include "tokenizer/tokenizer.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/f16.h"
#include "util/thread_pool.h"

namespace ember::cli {

namespace {

struct CompareArgs {
  std::string left, right;
  bool json = false, r2 = false, force = false, allow_non_finite = false;
  std::string json_out, html, perturb, model, tokenizer;
  int steps = 8;
  double max_abs = 0, min_cosine = 0, max_mse = 0, min_r2 = 0;
  CLI::Option *max_abs_opt = nullptr, *min_cosine_opt = nullptr, *max_mse_opt = nullptr,
              *min_r2_opt = nullptr;
  int threads = 0;
  bool allow_past_context = false;
  TwoSidedTrust trust;
};

struct PerturbArgs {
  std::string snapshot, receipt, part, quantize, layers, rotation = "llamacpp";
  int layer = -1, head = -1;
  bool zero = false, force = false;
  float scale = 1.0f;
  CLI::Option *scale_opt = nullptr, *layer_opt = nullptr, *head_opt = nullptr,
              *layers_opt = nullptr, *rotation_opt = nullptr;
};

// "0,2,3" -> {0, 2, 3}; each item a decimal integer (range and order are checked later).
std::vector<int> parse_layer_list(const std::string& s) {
  std::vector<int> out;
  size_t i = 0;
  while (i <= s.size()) {
    const size_t j = std::min(s.find(',', i), s.size());
    const std::string item = s.substr(i, j - i);
    if (item.empty() || item.size() > 6 || item.find_first_not_of("0123456789") != std::string::npos)
      fail_field("kv perturb", "--layers", "comma-separated layer numbers, e.g. 0,1,3", s);
    out.push_back(std::stoi(item));
    i = j + 1;
  }
  return out;
}

// LEFT is the reference and must be native to the loaded model, as strictly as an import:
// the model identity covers the weights and hyper-parameters (so RoPE and norms), the
// fingerprint the numerics, and the tokenizer identity the meaning of the prefix ids.
void check_left_is_native(const analysis::ComparedState& left, const model::Engine& engine,
                          const std::string& tokenizer_identity) {
  const char* where = "kv compare LEFT";
  const analysis::StateIdentity& id = left.identity;
  if (id.kind != "native") fail_field(where, "kind", "native", id.kind);
  if (id.model_identity != engine.model().identity()) {
    fail_field(where, "model.identity", engine.model().identity() + " (--model)", id.model_identity);
  }
  if (id.architecture != model::arch_name(engine.config().arch)) {
    fail_field(where, "model.architecture", model::arch_name(engine.config().arch), id.architecture);
  }
  if (id.engine_fingerprint != engine.fingerprint()) {
    fail_field(where, "numerics.engine_fingerprint", engine.fingerprint() + " (this engine)",
               id.engine_fingerprint);
  }
  if (left.coords.tokenizer_identity != tokenizer_identity) {
    fail_field(where, "tokenizer.identity", tokenizer_identity + " (the model's tokenizer)",
               left.coords.tokenizer_identity);
  }
}

void run_compare(const CompareArgs& a) {
  analysis::CompareOptions opts;
  opts.r2 = a.r2;
  auto given = [](const CLI::Option* o, double v) {
    return o->count() > 0 ? std::optional<double>(v) : std::nullopt;
  };
  opts.thresholds.max_abs = given(a.max_abs_opt, a.max_abs);
  opts.thresholds.min_cosine = given(a.min_cosine_opt, a.min_cosine);
  opts.thresholds.max_mse = given(a.max_mse_opt, a.max_mse);
  opts.thresholds.min_r2 = given(a.min_r2_opt, a.min_r2);
  analysis::validate_thresholds(opts.thresholds);
  const int threads = resolve_threads(a.threads);
  if (!a.model.empty() && (a.steps < 1 || a.steps > 4096)) {
    fail_field("kv compare", "--steps", "1..4096", std::to_string(a.steps));
  }
  // Refuse to clobber outputs (inputs even with --force) before doing any work.
  for (const std::string& out : {a.json_out, a.html}) {
    refuse_output_is_input(out, {a.left, a.right, a.perturb, a.model, a.tokenizer});
    if (!out.empty() && !a.force && path_exists(out)) {
      fail_field("kv compare", "output", "a path that does not exist (or --force)", out);
    }
  }

  if (a.allow_non_finite)
    std::fprintf(stderr, "ember: --allow-non-finite: NaN/Inf K/V are loaded for analysis (every other check "
                         "still applies); metrics over them are not meaningful\n");
  const analysis::ComparedState left = analysis::compared_from_state(open_state_ref(a.left, {kv::Accept::any, a.allow_non_finite}));
  analysis::ComparedState right = analysis::compared_from_state(open_state_ref(a.right, {kv::Accept::any, a.allow_non_finite}));
  kv::check_trust(a.left, left.identity.seal, left.identity.signature, a.trust.side(true));
  kv::check_trust(a.right, right.identity.seal, right.identity.signature, a.trust.side(false));

  ThreadPool pool(threads);
  std::optional<analysis::PerturbedState> perturbed;
  analysis::CompareReport report;
  if (!a.perturb.empty()) {
    const analysis::PerturbReceipt receipt = analysis::parse_receipt(read_file(a.perturb, 1 << 20), a.perturb);
    perturbed.emplace(analysis::apply_perturbation(std::move(right), receipt, a.allow_non_finite));
    report = analysis::compare_states(left, *perturbed, opts, &pool);
  } else {
    report = analysis::compare_states(left, right, opts, &pool);
  }
  if (!a.model.empty()) {
    const LoadedModel loaded = load_model({a.model, a.tokenizer, ""});
    model::Engine engine(loaded.model, model::EngineOptions{threads, a.allow_past_context});
    const std::unique_ptr<tok::Tokenizer>& t = loaded.tokenizer;
    check_left_is_native(left, engine, t->identity());
    // Step s evaluates position P + s: all below the model's context length (or the flag).
    check_positions(engine, int64_t(left.cache.n_pos) + 1, a.left, "positions + the resume token", a.steps,
                    "--steps");
    const analysis::ComparedState& r = perturbed ? perturbed->state() : right;
    report.diagnostics = analysis::run_diagnostics(engine, left, r, analysis::DiagnosticsOptions{a.steps});
  }
  const std::string json = analysis::report_json(report);
  if (!a.json_out.empty()) write_file_atomic(a.json_out, json, a.force);
  if (!a.html.empty()) write_file_atomic(
        a.html, analysis::report_html(report, report_stamp({{"LEFT", a.left}, {"RIGHT", a.right}, {"model", a.model}})),
        a.force);
  const std::string out = a.json ? json : analysis::report_table(report);
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
  if (!report.pass()) {
    const analysis::Failure& f = report.failures.front();
    throw CheckFailed{"kv compare: " + std::to_string(report.failures.size()) +
                      " threshold exceedance(s); first at layer " + std::to_string(f.layer) +
                      " head " + std::to_string(f.head) + " " + analysis::part_name(f.part) + " " +
                      f.metric};
  }
}

void run_perturb(const PerturbArgs& a) {
  const bool scaled = a.scale_opt->count() > 0;
  const bool quantized = !a.quantize.empty();
  const int ops = int(a.zero) + int(scaled) + int(quantized);
  if (ops != 1) {
    fail_field("kv perturb", "operation", "exactly one of --zero, --scale S or --quantize TYPE",
               ops == 0 ? "none" : "several");
  }
  const bool has_head = a.layer_opt->count() > 0 && a.head_opt->count() > 0;
  if (quantized && (a.layer_opt->count() > 0 || a.head_opt->count() > 0))
    fail_field("kv perturb", "--layer/--head",
               "--layers with --quantize (a cache row spans every KV head)", "--layer/--head");
  if (!quantized && !has_head)
    fail_field("kv perturb", "--layer/--head", "both, with --zero or --scale", "missing");
  if (!quantized && a.layers_opt->count() > 0)
    fail_field("kv perturb", "--layers", "only with --quantize", a.layers);
  if (!quantized && a.rotation_opt->count() > 0)
    fail_field("kv perturb", "--rotation", "only with --quantize", a.rotation);
  analysis::PerturbSpec spec;
  if (quantized) {
    const auto t = gguf::parse_type_name(a.quantize);
    if (!t || !gguf::is_kv_cache_quant_type(*t))
      fail_field("kv perturb", "--quantize", "one of q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl",
                 "'" + a.quantize + "'");
    spec.quantize = *t;
    spec.rotation = analysis::parse_kv_rotation(a.rotation, "kv perturb", "--rotation");
    if (a.layers_opt->count() > 0) spec.layers = parse_layer_list(a.layers);
  }
  spec.layer = a.layer;
  spec.head = a.head;
  spec.part = analysis::parse_perturb_part(a.part);
  spec.zero = a.zero;
  if (scaled) spec.scale_bits = f32_to_bits(a.scale);
  refuse_output_is_input(a.receipt, {a.snapshot});
  if (!a.force && path_exists(a.receipt)) {
    fail_field("kv perturb", "--receipt", "a path that does not exist (or --force)", a.receipt);
  }
  const analysis::ComparedState source = analysis::compared_from_state(open_state_ref(a.snapshot, {kv::Accept::native}));
  const analysis::PerturbReceipt r = analysis::make_receipt(source, spec);
  analysis::write_receipt(a.receipt, r, a.force);
  const std::string what =
      quantized ? "quantize " + a.quantize + " rotation " + a.rotation + " layers " +
                      (a.layers.empty() ? "all" : a.layers)
                : std::string(a.zero ? "zero" : "scale") + " layer " + std::to_string(a.layer) +
                      " head " + std::to_string(a.head);
  std::printf("receipt %s: %s part %s; %llu K and %llu V elements selected, "
              "%llu K and %llu V change (no cache written)\n",
              a.receipt.c_str(), what.c_str(), a.part.c_str(),
              (unsigned long long)r.affected_k, (unsigned long long)r.affected_v,
              (unsigned long long)r.changed_k, (unsigned long long)r.changed_v);
}

}  // namespace

void register_kv_compare_commands(CLI::App& kv) {
  auto ca = std::make_shared<CompareArgs>();
  CLI::App* c = kv.add_subcommand(
      "compare", "Compare two aligned KV states per layer and KV head (docs/compare.md)");
  c->add_option("LEFT", ca->left, "Reference state (snapshot directory or KVC1 file)")->required();
  c->add_option("RIGHT", ca->right, "Candidate state")->required();
  add_two_sided_trust_flags(c, ca->trust);
  c->add_flag("--json", ca->json, "Print the canonical JSON report instead of the table");
  c->add_option("--json-out", ca->json_out, "Also write the JSON report to this file");
  c->add_flag("--r2", ca->r2, "Add the directional R² (RIGHT explained by LEFT)");
  ca->max_abs_opt = c->add_option("--max-abs", ca->max_abs, "Fail when max |R-L| of a head exceeds X");
  ca->min_cosine_opt = c->add_option("--min-cosine", ca->min_cosine, "Fail when a head's cosine is below C");
  ca->max_mse_opt = c->add_option("--max-mse", ca->max_mse, "Fail when a head's MSE exceeds M");
  ca->min_r2_opt = c->add_option("--min-r2", ca->min_r2, "Fail when a head's R² is below R (implies --r2)");
  c->add_option("--perturb", ca->perturb, "Apply this perturbation receipt to RIGHT in memory");
  c->add_option("-m,--model", ca->model, "Run the diagnostics with LEFT's model (GGUF)");
  c->add_option("--tokenizer", ca->tokenizer, "tokenizer.json (default: the GGUF's own)");
  c->add_option("--steps", ca->steps, "Diagnostic steps K (default 8)");
  add_threads_option(c, ca->threads);
  add_past_context_flag(c, ca->allow_past_context);
  c->add_option("--html", ca->html, "Write the self-contained HTML report to this file");
  c->add_flag("--force", ca->force, "Overwrite existing output files");
  c->add_flag("--allow-non-finite", ca->allow_non_finite,
              "Load caches holding NaN/Inf K/V (refused otherwise), to analyse broken caches");
  c->callback([ca] { run_compare(*ca); });

  auto pa = std::make_shared<PerturbArgs>();
  CLI::App* p = kv.add_subcommand(
      "perturb", "Write a perturbation receipt (never a cache) for kv compare --perturb");
  p->add_option("--snapshot", pa->snapshot, "The native source snapshot")->required();
  pa->layer_opt = p->add_option("--layer", pa->layer, "Layer (--zero / --scale)");
  pa->head_opt = p->add_option("--head", pa->head, "KV head (--zero / --scale)");
  p->add_option("--part", pa->part, "k, v or kv")->required();
  p->add_flag("--zero", pa->zero, "Set the selected elements to +0.0");
  pa->scale_opt = p->add_option("--scale", pa->scale, "Multiply the selected elements by S (f32)");
  p->add_option("--quantize", pa->quantize,
                "Quantize whole cache rows as llama.cpp's --cache-type-k/-v TYPE does: q8_0, "
                "q4_0, q4_1, q5_0, q5_1 or iq4_nl");
  pa->layers_opt = p->add_option("--layers", pa->layers,
                                 "With --quantize: comma-separated layers (default all)");
  pa->rotation_opt = p->add_option(
      "--rotation", pa->rotation,
      "With --quantize: llamacpp (default: llama.cpp v0.5.0's Hadamard rotation of quantized "
      "K/V where head_dim is a multiple of 64) or none (LLAMA_ATTN_ROT_DISABLE=1)");
  p->add_option("--receipt", pa->receipt, "Receipt JSON to write")->required();
  p->add_flag("--force", pa->force, "Overwrite an existing receipt");
  p->callback([pa] { run_perturb(*pa); });
}

}  // namespace ember::cli
