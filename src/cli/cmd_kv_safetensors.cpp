// ember kv import-safetensors | export-safetensors (docs/formats/safetensors-cache.md).
// Thin over kv/safetensors_cache.h: parse flags, load, call, print.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/limits.h"
#include "cli/model_loader.h"
#include "cli/prompt_text.h"
#include "cli/store_flags.h"
#include "cli/token_ids.h"
#include "cli/trust_flags.h"
#include "kv/import.h"
#include "kv/safetensors_cache.h"
#include "kv/state.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/printable.h"

namespace ember::cli {
namespace {

namespace st = ember::safetensors;

st::Dtype parse_dtype(const std::string& s) {
  if (s == "f16") return st::Dtype::f16;
  if (s == "bf16") return st::Dtype::bf16;
  if (s == "f32") return st::Dtype::f32;
  fail_field("--dtype", "value", "f16|bf16|f32", s);
}

void add_import_safetensors(CLI::App& kv) {
  struct Opts {
    std::string input, model, tokenizer, output, prompt, prompt_file, ids, layout = "mlx", engine;
    int threads = 0;
    bool no_bos = false, force = false, no_model_check = false;
    int check_positions = kv::kModelCheckPositions;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* c = kv.add_subcommand("import-safetensors",
                                  "Make a foreign state (ember.kv-foreign) of a KV cache another runtime wrote "
                                  "as safetensors (mlx-lm save_prompt_cache, vLLM example connector, torch)");
  c->add_option("input", o->input, "the .safetensors file (mlx) or per-layer directory (vllm)")->required();
  c->add_option("-m,--model", o->model, "the GGUF model the cache belongs to (the file does not say)")->required();
  c->add_option("--tokenizer", o->tokenizer, "Hugging Face tokenizer.json (default: the GGUF's own)");
  c->add_option("--layout", o->layout, "mlx | vllm (default mlx)");
  c->add_option("--engine", o->engine,
                "what computed the cache, recorded as foreign.engine (default: the layout's runtime, mlx or "
                "vllm; a cache torch wrote says torch)");
  auto* t = c->add_option("-p,--prompt", o->prompt, "the prefix the cache holds, as text");
  auto* f = c->add_option("-f,--prompt-file", o->prompt_file, "the prefix as text from a file (UTF-8)");
  auto* i = c->add_option("--prompt-ids", o->ids, "the prefix as comma-separated token ids (no BOS added)");
  t->excludes(f)->excludes(i);
  f->excludes(i);
  c->add_flag("--no-bos", o->no_bos, "do not prepend BOS to the prompt text");
  add_model_check_flags(c, o->check_positions, o->no_model_check);
  c->add_option("--output,-o", o->output, "foreign state directory to create")->required();
  c->add_flag("--force", o->force, "replace an existing state directory");
  add_threads_option(c, o->threads);
  c->callback([o, i] {
    refuse_output_is_input(o->output, {o->input, o->model, o->tokenizer, o->prompt_file});
    if (kv::state_kind(o->input) == "kvc1")
      fail_field("kv import-safetensors", o->input, "a safetensors cache",
                 "a KVC1 file (kv replay, kv compare and kvc unpack read one; a torch cache ember_kv.torch_gate "
                 "wrote becomes safetensors with python3 -m ember_kv.torch_gate safetensors)");
    const kv::SafetensorsLayout layout = kv::parse_safetensors_layout(o->layout);
    LoadedModel lm = load_model({o->model, o->tokenizer, ""});
    model::Engine engine(lm.model, model::EngineOptions{resolve_threads(o->threads), false});
    std::vector<int32_t> prefix;
    if (i->count() > 0) {
      prefix = parse_token_ids("--prompt-ids", o->ids);
    } else {
      if (o->prompt_file.empty() && o->prompt.empty())
        fail_field("prompt", "source", "--prompt TEXT, --prompt-file F or --prompt-ids LIST (the file does not say)",
                   "none");
      const std::string text = !o->prompt_file.empty() ? read_prompt_file(o->prompt_file)
                                                        : checked_prompt_text(o->prompt, "--prompt");
      prefix = lm.tokenizer->encode(text, !o->no_bos && lm.tokenizer->add_bos_default());
    }
    const int vocab = lm.model->config().n_vocab;
    for (int32_t id : prefix)
      if (id < 0 || id >= vocab)
        fail_field("prompt", "token id", "below the vocabulary size " + std::to_string(vocab), std::to_string(id));
    const kv::SnapshotManifest target = kv::describe_target(engine, lm.tokenizer->identity());
    kv::ForeignCache fc = kv::read_safetensors_cache(o->input, layout, target.geometry, target.rope.layout);
    const std::string dtype = fc.source_dtype;
    kv::ForeignImportOptions opt;
    opt.check_positions = o->check_positions;
    opt.model_check = !o->no_model_check;
    opt.producer = std::string(kProducer) + " kv import-safetensors (" + o->layout + ", " + dtype + ")";
    opt.engine = o->engine;
    kv::ForeignImport r =
        kv::import_foreign(engine, lm.tokenizer->identity(), prefix, std::move(fc), opt, o->input);
    kv::write_state_dir(r.snapshot, o->output, o->force);
    const kv::SnapshotManifest& m = r.snapshot.manifest();
    std::printf("%s: %d positions from %s (%s layout, %s, computed by %s: a foreign state, replayed only with "
                "--allow-foreign); %s; resume token %d at position %lld\n",
                printable(o->output).c_str(), m.geometry.positions, printable(o->input).c_str(), o->layout.c_str(),
                dtype.c_str(), printable(r.snapshot.header().foreign()->engine).c_str(),
                kv::model_check_figures(r.check).c_str(), int(m.resume.token),
                static_cast<long long>(m.resume.position));
    print_seal(m);
  });
}

void add_export_safetensors(CLI::App& kv) {
  struct Opts {
    std::string snapshot, output, layout = "mlx", dtype = "f16";
    bool force = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* c = kv.add_subcommand("export-safetensors",
                                  "Write a snapshot's K/V as safetensors (mlx-lm prompt cache or vLLM connector layout)");
  c->add_option("snapshot", o->snapshot, "snapshot directory")->required();
  c->add_option("--output,-o", o->output, "the .safetensors file (mlx) or directory (vllm) to create")->required();
  c->add_option("--layout", o->layout, "mlx | vllm (default mlx)");
  c->add_option("--dtype", o->dtype, "f16 (bit-exact, default) | f32 (exact) | bf16 (rounded)");
  c->add_flag("--force", o->force, "replace an existing output");
  c->callback([o] {
    refuse_output_is_input(o->output, {o->snapshot});
    const kv::SafetensorsLayout layout = kv::parse_safetensors_layout(o->layout);
    const st::Dtype dtype = parse_dtype(o->dtype);
    const kv::VerifiedState s = open_state_ref(o->snapshot, {kv::Accept::native});
    const kv::SnapshotManifest& m = s.manifest();
    // The identity the format cannot carry, as strings, so a reader can at least see it.
    const std::map<std::string, std::string> md{
        {"ember_model_identity", m.model.identity},   {"ember_tokenizer_identity", m.tokenizer.identity},
        {"ember_architecture", m.model.architecture}, {"ember_prefix_sha256", m.prefix.sha256},
        {"ember_resume_token", std::to_string(m.resume.token)},
        {"ember_snapshot_seal", m.seal},              {"ember_key_order", "hf-rotate-half"}};
    kv::write_safetensors_cache(s.cache(), m.rope.layout, layout, dtype, md, o->output, o->force);
    std::printf("%s: %d layers x %d positions, %s layout, %s, keys in Hugging Face order\n",
                printable(o->output).c_str(), m.geometry.layers, m.geometry.positions, o->layout.c_str(),
                st::dtype_name(dtype));
  });
}

}  // namespace

void register_kv_safetensors_commands(CLI::App& kv) {
  add_import_safetensors(kv);
  add_export_safetensors(kv);
}

}  // namespace ember::cli
