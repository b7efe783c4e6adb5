// ember study sweep: the recompute-anchor boundary sweep on a real model pair (map/sweep.h).
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/limits.h"
#include "cli/map_commands.h"
#include "cli/model_loader.h"
#include "cli/prompt_list.h"
#include "cli/version.h"
#include "kv/state.h"
#include "map/split.h"
#include "map/sweep.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/printable.h"

namespace ember::cli {

void register_sweep_command(CLI::App& study) {
  auto* c = study.add_subcommand("sweep",
                                 "Sweep the recompute anchor a from s to L on a real model pair: "
                                 "fidelity and measured time-to-first-token");
  auto o = std::make_shared<map::SweepOptions>();
  auto split = std::make_shared<std::string>("320:80");
  auto json_path = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto html_path = std::make_shared<std::string>();
  auto force = std::make_shared<bool>(false);
  c->add_option("--source", o->source_path, "Source model (GGUF)")->required();
  c->add_option("--target", o->target_path, "Target model (GGUF)")->required();
  auto prompts = std::make_shared<PromptListArgs>();
  add_prompt_list_flags(c, *prompts);
  c->add_option("--tokenizer", o->tokenizer_path, "Hugging Face tokenizer.json for both models (default: each GGUF's own)");
  c->add_option("--split", *split, "Calibration:evaluation prompt counts (frozen split)");
  c->add_option("--seed", o->seed, "Split seed")->check(seed_value());
  c->add_option("--lambda", o->lambda, "The one penalty of the fit");
  c->add_option("--kind", o->kind,
                "affine (affine maps, L2 anchor toward the identity; default) | ridge (plain ridge, the ridge pilot)")
      ->check(CLI::IsMember({"affine", "ridge"}));
  c->add_option("--greedy-steps", o->greedy_steps, "Greedy steps compared")->check(CLI::Range(1, 256));
  c->add_option("--repeats", o->timing_repeats, "Timing repeats per prompt (the median is taken)")->check(CLI::Range(1, 100));
  add_threads_option(c, o->threads);
  c->add_option("--label", o->label,
                "quantization-boundary | same-base | cross-model, as map fit --relation (default: "
                "quantization-boundary if the tensor types differ, else cross-model)")
      ->check(CLI::IsMember({kv::kRelations[0], kv::kRelations[1], kv::kRelations[2]}));
  c->add_flag("--json", *json, "Print the JSON report instead of the table");
  c->add_option("--json-out", *json_path, "Write the JSON report to this file");
  c->add_option("--html", *html_path, "Write the HTML report (inline SVG plots) here");
  c->add_flag("--force", *force, "Overwrite existing report files");
  c->add_option("--anchors", o->anchors, "The anchors a swept, comma-separated, each in [s, L] (default: all)")
      ->delimiter(',');
  auto budget = std::make_shared<std::string>();
  c->add_option("--fidelity-budget", *budget,
                "Choose the fastest boundary meeting kl<=X | rel<=X | agreement>=X on calibration prompts, "
                "only if faster than the target's full prefill (else exit 1 saying so)");
  auto ttft_case = std::make_shared<std::string>("with-source");
  c->add_option("--ttft-case", *ttft_case,
                "The TTFT the budget's choice is timed by: handoff (the source state in memory) | with-source "
                "(plus the source's prefill) | stored (plus loading the stored source state)")
      ->capture_default_str();
  c->add_option("--budget-prompts", o->budget_prompts, "Calibration prompts the budget is judged on")
      ->check(CLI::Range(1, 100000));
  c->add_flag("--budget-in-sample", o->budget_in_sample,
              "Judge the budget on calibration prompts the mapper was also fitted on (default: withheld from the fit)");
  auto no_stored = std::make_shared<bool>(false);
  c->add_flag("--no-stored-timing", *no_stored,
              "Do not time loading the source state from a snapshot on disk (no scratch files)");
  c->callback([=] {
    const auto [n_calib, n_eval] = map::parse_split_counts(*split, "study sweep");
    map::SweepOptions opts = *o;
    opts.threads = resolve_threads(o->threads);
    opts.n_calib = n_calib;
    opts.n_eval = n_eval;
    // The budget and its TTFT case are refused before any model is read.
    if (!budget->empty()) opts.budget = map::FidelityBudget::parse(*budget, "study sweep");
    opts.ttft_case = map::parse_ttft_case(*ttft_case, "study sweep");
    if (opts.ttft_case == map::TtftCase::stored && *no_stored)
      fail_field("study sweep", "--ttft-case", "handoff or with-source with --no-stored-timing", "stored");
    for (const std::string* p : {json_path.get(), html_path.get()})
      refuse_output_is_input(*p, {o->source_path, o->target_path, prompts->prompts, prompts->prompt_ids,
                                  o->tokenizer_path, prompts->chat.tokenizer_config});
    for (const std::string* p : {json_path.get(), html_path.get()})
      if (!p->empty() && !*force && path_exists(*p))
        fail(*p, "already exists; refusing to overwrite it (pass --force to replace it)");
    {
      // The prompts as ids, read as map collect reads them (cli/prompt_list.h).
      PromptListArgs pl = *prompts;
      pl.chat.model = o->source_path;
      const LoadedModel src = load_model({o->source_path, o->tokenizer_path, ""});
      opts.prompts = read_prompt_list(pl, *src.tokenizer, src.model->config().n_vocab, "study sweep");
      if (opts.prompts.empty()) fail_field("study sweep", "prompts", "at least one non-empty prompt", "none");
    }
    // The source snapshots for the stored-state timing live in a scratch directory, removed here.
    std::string scratch;
    if (!*no_stored) {
      std::string tmpl = (std::filesystem::temp_directory_path() / "ember-sweep-XXXXXX").string();
      if (!::mkdtemp(tmpl.data())) fail("study sweep", "cannot create a scratch directory");
      scratch = opts.work_dir = tmpl;
    }
    struct Remove {
      std::string path;
      ~Remove() {
        std::error_code ec;
        if (!path.empty()) std::filesystem::remove_all(path, ec);
      }
    } remove{scratch};
    const map::SweepResult r = map::run_sweep(opts);
    std::cout << (*json ? printable_json(r.to_json(), 2) + "\n" : r.table());
    if (!json_path->empty()) write_file_atomic(*json_path, r.to_json().dump(2) + "\n", *force);
    if (!html_path->empty()) write_file_atomic(*html_path,
                                                   r.html(report_stamp({{"source", o->source_path},
                                                                        {"target", o->target_path},
                                                                        {"prompts", prompts->prompts},
                                                                        {"prompt ids", prompts->prompt_ids}})),
                                                   *force);
    // The reports are written; a budget that no boundary meets faster than the full prefill
    // is a check that failed (exit 1), so a script does not take a boundary it should not.
    if (!r.recommends_boundary()) throw CheckFailed{"study sweep: " + r.choice["verdict"].get<std::string>()};
  });
}

}  // namespace ember::cli
