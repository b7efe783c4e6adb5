// ember kv matrix: the exact-replay matrix over models x prompts x thread/SIMD variants
// (analysis/matrix.h, docs/matrix.md). Thin: reads the model list, loads and tokenizes per
// model, runs the library, prints the table, writes the reports.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "analysis/matrix.h"
#include "cli/commands.h"
#include "cli/limits.h"
#include "cli/model_loader.h"
#include "cli/prompt_list.h"
#include "cli/prompt_text.h"
#include "cli/version.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/printable.h"

namespace ember::cli {

namespace {

constexpr const char* kWhere = "kv matrix";
constexpr size_t kMaxModels = 10000;

struct MatrixArgs {
  std::vector<std::string> models;
  std::string models_file, variants = analysis::kDefaultVariants, out, json_out, html;
  PromptListArgs prompts;
  int n = 24, threads = 0, control_layer = 0, control_head = 0;
  bool keep = false, force = false, allow_past_context = false, json = false;
};

// A models list: one GGUF path a line; blank lines and lines starting with '#' are skipped;
// a relative path is relative to the list's directory.
std::vector<std::string> read_models_file(const std::string& path) {
  const std::string text = read_prompt_file(path);
  const std::filesystem::path base = std::filesystem::path(path).parent_path();
  std::vector<std::string> out;
  size_t start = 0, line_no = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    start = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t b = line.find_first_not_of(" \t"), e = line.find_last_not_of(" \t");
    if (b == std::string::npos || line[b] == '#') continue;
    line = line.substr(b, e - b + 1);
    if (out.size() == kMaxModels)
      fail_field(path + ":" + std::to_string(line_no), "models", "at most " + std::to_string(kMaxModels), "more");
    out.push_back(std::filesystem::path(line).is_absolute() ? line : (base / line).string());
  }
  if (out.empty()) fail_field(path, "models", "at least one GGUF path", "none");
  return out;
}

// The report's inputs: every model, the models file, the prompt set.
html::Stamp matrix_stamp(const MatrixArgs& a) {
  std::vector<std::pair<std::string, std::string>> inputs;
  for (const std::string& m : a.models) inputs.push_back({"model", m});
  inputs.insert(inputs.end(), {{"models", a.models_file}, {"prompts", a.prompts.prompts},
                               {"prompt ids", a.prompts.prompt_ids}});
  return report_stamp(inputs);
}

void run(MatrixArgs& a) {
  std::vector<std::string> models = a.models;
  if (!a.models_file.empty())
    for (const std::string& m : read_models_file(a.models_file)) models.push_back(m);
  if (models.empty()) fail_field(kWhere, "models", "--model M.gguf (repeatable) or --models LIST", "none");
  std::vector<analysis::MatrixVariant> variants = analysis::parse_variants(a.variants);
  for (analysis::MatrixVariant& v : variants)
    for (int& t : v.threads)
      if (t > 0) t = check_threads(t, "--variants thread count");
  if (a.n < 2) fail_field(kWhere, "-n", ">= 2 (one boundary row and at least one replay row)", std::to_string(a.n));
  if (a.control_layer < 0 || a.control_head < 0)
    fail_field(kWhere, "--control-layer/--control-head", ">= 0",
               std::to_string(a.control_layer) + "/" + std::to_string(a.control_head));
  std::vector<std::string> inputs = models;
  for (const std::string* p : {&a.models_file, &a.prompts.prompts, &a.prompts.prompt_ids, &a.prompts.chat.tokenizer_config})
    if (!p->empty()) inputs.push_back(*p);
  for (const std::string* p : {&a.json_out, &a.html, &a.out}) {
    refuse_output_is_input(*p, inputs);
    if (p != &a.out && !p->empty() && !a.force && path_exists(*p))
      fail_field(kWhere, "output", "a path that does not exist (or --force)", *p);
  }
  namespace fs = std::filesystem;
  if (fs::exists(a.out) && !fs::is_directory(a.out))
    fail_field(kWhere, "--output", "a directory", "a path that is not one: " + a.out);
  if (fs::exists(a.out) && !fs::is_empty(a.out) && !a.force)
    fail_field(kWhere, "--output", "a directory that does not exist or is empty (or --force)", a.out);
  fs::create_directories(a.out);

  analysis::MatrixOptions o;
  o.steps = a.n;
  o.threads = resolve_threads(a.threads);
  o.control_layer = a.control_layer;
  o.control_head = a.control_head;
  o.allow_past_context = a.allow_past_context;
  o.out = a.out;
  o.keep = a.keep;
  const analysis::MatrixLoader load = [&a](const std::string& path) {
    LoadedModel m = load_model({path, "", ""});
    PromptListArgs p = a.prompts;
    p.chat.model = path;
    analysis::MatrixModel mm;
    mm.tokenizer_identity = m.tokenizer->identity();
    for (NamedPrompt& np : read_named_prompt_list(p, *m.tokenizer, m.model->config().n_vocab, kWhere))
      mm.prompts.push_back({std::move(np.id), std::move(np.tokens)});
    mm.model = std::move(m.model);
    return mm;
  };
  const analysis::MatrixReport r = analysis::run_matrix(models, load, variants, o);
  if (!a.keep) {
    std::error_code ec;
    fs::remove(a.out + "/cells", ec);  // empty unless a cell's directory could not be removed
  }
  const std::string printed = a.json ? printable_json(r.json_doc(), 2) + "\n" : r.table();
  std::fwrite(printed.data(), 1, printed.size(), stdout);
  std::fflush(stdout);
  if (!a.json_out.empty()) write_file_atomic(a.json_out, r.json(), a.force);
  if (!a.html.empty()) write_file_atomic(a.html, r.html(matrix_stamp(a)), a.force);
  if (!r.ok()) {
    std::string which;
    int listed = 0;
    for (const analysis::MatrixCell& c : r.cells)
      if ((c.status == "fail" || c.status == "error") && listed++ < 3)
        which += std::string(listed > 1 ? "; " : "") + c.model_name + "/" + c.prompt_id + "/" + c.variant;
    throw CheckFailed{"kv matrix: " + std::to_string(r.failed()) + " failed and " + std::to_string(r.errors()) +
                      " error cells (" + printable(which) + (r.failed() + r.errors() > 3 ? "; ..." : "") + ")"};
  }
}

}  // namespace

void register_kv_matrix_command(CLI::App& kv) {
  auto a = std::make_shared<MatrixArgs>();
  CLI::App* c = kv.add_subcommand(
      "matrix", "The exact-replay matrix: export + replay gate + self-compare + zeroing control over "
                "models x prompts x thread/SIMD variants (docs/matrix.md)");
  c->add_option("-m,--model", a->models, "GGUF model (repeatable)");
  c->add_option("--models", a->models_file, "File of GGUF paths, one a line ('#' comments; relative to the file)");
  add_prompt_list_flags(c, a->prompts);
  c->add_option("--variants", a->variants,
                "Thread/SIMD variants: 't1;t1-2-3;simd=scalar;t2,simd=avx2/avx512/avx2' (roles native/export/replay)")
      ->capture_default_str();
  c->add_option("-n", a->n, "Native selection steps N (>= 2); replay runs N-1")->capture_default_str();
  add_threads_option(c, a->threads, "threads of a role its variant does not set (default: the cores present)");
  c->add_option("--control-layer", a->control_layer, "Layer of the zeroing control (default 0)");
  c->add_option("--control-head", a->control_head, "KV head of the zeroing control (default 0)");
  c->add_option("-o,--output", a->out, "Directory for the cells (snapshots, logits, receipts with --keep)")->required();
  c->add_flag("--keep", a->keep, "Keep every cell's snapshot, logits and control receipt under OUT/cells/");
  c->add_flag("--json", a->json, "Print the ember.kv-matrix.v1 JSON report instead of the table");
  c->add_option("--json-out", a->json_out, "Write the ember.kv-matrix.v1 JSON report to this file");
  c->add_option("--html", a->html, "Write the HTML report here");
  c->add_flag("--force", a->force, "Reuse a non-empty --output and overwrite existing report files");
  add_past_context_flag(c, a->allow_past_context);
  c->callback([a] { run(*a); });
}

}  // namespace ember::cli
