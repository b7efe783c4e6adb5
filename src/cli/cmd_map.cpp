// ember map collect|fit|apply|replay|hybrid and ember study recompute-anchor|sweep: thin
// wrappers over src/map (docs/mapping.md).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "cli/limits.h"
#include "cli/map_commands.h"
#include "map/study_anchor.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/printable.h"

namespace ember::cli {
namespace {

// A scratch directory removed when the command ends (the study's generated model pairs).
struct ScratchDir {
  std::string path;
  bool keep = false;
  ScratchDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ember-study-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) fail("study", "cannot create a scratch directory");
    path = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!keep) std::filesystem::remove_all(path, ec);
  }
};

void register_study(CLI::App& app) {
  CLI::App* study = app.add_subcommand("study", "Controlled studies of cache translation");
  study->require_subcommand(1);

  auto* ra = study->add_subcommand("recompute-anchor",
                                   "Seed 001's controlled study: identity, affine, ridge_l2 and the "
                                   "recompute-anchor hybrid on random model pairs");
  auto o = std::make_shared<map::AnchorStudyOptions>();
  auto json_path = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto work = std::make_shared<std::string>();
  auto force = std::make_shared<bool>(false);
  ra->add_option("--seeds", o->seeds, "Model pairs (seeds)")->check(CLI::Range(1, 1000));
  ra->add_option("--fit-prompts", o->fit_prompts, "Fit prompts per seed")->check(CLI::Range(1, 100000));
  ra->add_option("--eval-prompts", o->eval_prompts, "Evaluation prompts per seed")->check(CLI::Range(1, 100000));
  ra->add_option("--first-seed", o->first_seed, "First seed")->check(seed_value());
  ra->add_option("--layers", o->layers, "Layers of the toy models")->check(CLI::Range(2, 64));
  ra->add_option("--hidden", o->hidden, "Width (hidden size)")->check(CLI::Range(4, 4096));
  ra->add_option("--heads", o->heads, "Attention heads (= KV heads unless --kv-heads)")->check(CLI::Range(1, 256));
  auto* kvh = ra->add_option("--kv-heads", o->kv_heads, "KV heads")->check(CLI::Range(1, 256));
  ra->add_option("--ffn", o->ffn, "MLP inner size")->check(CLI::Range(1, 65536));
  ra->add_option("--alpha", o->alpha, "Perturbation of the target's layers >= 1 and LM head (x sd(w))")
      ->check(CLI::Range(0.0, 100.0));
  ra->add_option("--activation", o->activation, "swiglu | gelu (seed 001: GELU)")
      ->check(CLI::IsMember({"swiglu", "gelu"}));
  ra->add_option("--norm", o->norm, "rmsnorm | layernorm")->check(CLI::IsMember({"rmsnorm", "layernorm"}));
  ra->add_flag("--json", *json, "Print the JSON report instead of the table");
  ra->add_option("--json-out", *json_path, "Write the JSON report to this file");
  ra->add_option("--work-dir", *work, "Keep the generated model pairs in this directory");
  ra->add_flag("--force", *force, "Overwrite an existing --json-out file");
  ra->callback([=] {
    ScratchDir scratch;
    map::AnchorStudyOptions opts = *o;
    if (!kvh->count()) opts.kv_heads = opts.heads;
    if (!work->empty()) {
      std::filesystem::create_directories(*work);
      opts.work_dir = *work;
    } else {
      opts.work_dir = scratch.path;
    }
    if (!json_path->empty() && !*force && path_exists(*json_path))
      fail(*json_path, "already exists; refusing to overwrite it (pass --force to replace it)");
    const map::AnchorStudyResult r = map::run_anchor_study(opts);
    if (*json) {
      std::cout << printable_json(r.to_json(), 2) << "\n";
    } else {
      std::cout << "recompute-anchor study: " << opts.seeds << " seeds x " << opts.eval_prompts
                << " evaluation prompts (" << opts.fit_prompts << " fit prompts per seed), " << opts.layers
                << " layers, hidden " << opts.hidden << ", " << opts.heads << " heads, " << opts.activation
                << " MLP " << opts.ffn << ", " << opts.norm << ", alpha " << opts.alpha << ", "
                << "one-token decode, agreement with the target's own full prefill\n\n"
                << r.table();
    }
    if (!json_path->empty()) write_file_atomic(*json_path, r.to_json().dump(2) + "\n", *force);
  });

  register_sweep_command(*study);
  register_kv_quant_study_command(*study);
}

}  // namespace

void register_map_commands(CLI::App& app) {
  CLI::App* m = app.add_subcommand("map", "Cache translation: collect, fit, apply, replay, hybrid");
  m->require_subcommand(1);
  register_map_artifact_commands(*m);
  register_study(app);
}

}  // namespace ember::cli
