// ember kv import-llamacpp | export-llamacpp (docs/formats/llamacpp-state.md). Thin over
// kv/llamacpp_import.h: parse flags, load, call, print.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "cli/limits.h"
#include "cli/model_loader.h"
#include "cli/store_flags.h"
#include "cli/trust_flags.h"
#include "gguf/arch.h"
#include "kv/llamacpp_import.h"
#include "kv/state.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/mapped_file.h"
#include "util/printable.h"

namespace ember::cli {
namespace {

void add_import_llamacpp(CLI::App& kv) {
  struct Opts {
    std::string state, model, tokenizer, arch, output, sign;
    int threads = 0;
    int64_t resume = -1;
    bool force = false, no_attn_rot = false, no_model_check = false;
    int check_positions = kv::kModelCheckPositions;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* c = kv.add_subcommand("import-llamacpp",
                                  "Read a llama.cpp sequence state (ggsq v3) for a GGUF, checked, "
                                  "as an ember.kv-foreign cache");
  c->add_option("state", o->state, "state file (llama_state_seq_save_file, llama-server slot save)")
      ->required();
  c->add_option("-m,--model", o->model, "the GGUF the state was computed with")->required();
  c->add_option("--tokenizer", o->tokenizer,
                "Hugging Face tokenizer.json (default: the GGUF's own)");
  c->add_option("--arch", o->arch, "assert the model's architecture (" + gguf::arch_names("|") + ")");
  c->add_option("--output,-o", o->output, "directory to create")->required();
  auto* resume = c->add_option("--resume-token", o->resume,
                               "the token at position P (default: ember's argmax for the last "
                               "prompt token over the imported cache)");
  c->add_flag(
      "--no-attn-rot", o->no_attn_rot,
      "quantized rows are not Hadamard-rotated (written with LLAMA_ATTN_ROT_DISABLE=1, or by a "
      "llama.cpp before attention rotation)");
  add_model_check_flags(c, o->check_positions, o->no_model_check);
  c->add_flag("--force", o->force, "replace an existing output directory");
  add_threads_option(c, o->threads);
  add_sign_flag(c, o->sign);
  c->callback([o, resume] {
    refuse_output_is_input(o->output, {o->state, o->model, o->tokenizer});
    LoadedModel m = load_model({o->model, o->tokenizer, o->arch});
    model::Engine engine(m.model, model::EngineOptions{resolve_threads(o->threads), false});
    const auto file = MappedFile::open(o->state);
    kv::LlamaCppImportOptions opt;
    opt.attn_rot = !o->no_attn_rot;
    opt.check_positions = o->check_positions;
    opt.model_check = !o->no_model_check;
    // Range-checked by import_llamacpp against the vocabulary (a negative id is refused there).
    if (resume->count() > 0)
      opt.resume_token = int32_t(std::clamp<int64_t>(o->resume, INT32_MIN, INT32_MAX));
    kv::ModelCheck check;
    kv::VerifiedState s = kv::import_llamacpp(std::span<const uint8_t>(file->data(), file->size()),
                                              engine, m.tokenizer->identity(), opt, o->state, &check);
    if (!o->sign.empty()) s = kv::resign(std::move(s), o->sign);
    kv::write_state_dir(s, o->output, o->force);
    const kv::SnapshotManifest& mf = s.manifest();
    const kv::ForeignProvenance& f = *s.header().foreign();
    std::printf(
        "%s: %d tokens from llama.cpp (K %s rotation %s, V %s rotation %s, V %s, %s); resume token "
        "%d (%s) "
        "at position %d\n",
        printable(o->output).c_str(), mf.geometry.positions, f.cache_type_k.c_str(),
        f.detail("k_rotation").c_str(), f.cache_type_v.c_str(), f.detail("v_rotation").c_str(),
        f.detail("v_layout").c_str(), f.conversion.c_str(), int(mf.resume.token), f.resume_source.c_str(),
        mf.geometry.positions);
    std::printf("%s\n", kv::model_check_figures(check).c_str());
    std::printf("keys %s\nvalues %s\n", mf.keys.sha256.c_str(), mf.values.sha256.c_str());
    std::printf("seal %s\n", mf.seal.c_str());
  });
}

void add_export_llamacpp(CLI::App& kv) {
  struct Opts {
    std::string snapshot, output, layout = "transposed";
    bool force = false;
    kv::TrustRequirements trust;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* c = kv.add_subcommand("export-llamacpp",
                                  "Write a snapshot's f16 K/V as a llama.cpp sequence state (ggsq "
                                  "v3, llama_state_seq_load_file)");
  c->add_option("snapshot", o->snapshot, "native snapshot directory (or KVC1 file)")->required();
  c->add_option("--output,-o", o->output, "state file to create")->required();
  c->add_option("--v-layout", o->layout,
                "transposed (llama.cpp with flash attention off) or rows (flash attention on)")
      ->check(CLI::IsMember({"transposed", "rows"}))
      ->capture_default_str();
  c->add_flag("--force", o->force, "replace an existing state file");
  add_trust_flags(c, o->trust);
  c->callback([o] {
    refuse_output_is_input(o->output, {o->snapshot});
    const kv::VerifiedState s = open_state_ref(o->snapshot);
    check_artifact_trust(o->snapshot, s.manifest(), o->trust);
    const std::vector<uint8_t> bytes = kv::export_llamacpp(s, o->layout == "transposed");
    write_file_atomic(o->output,
                      std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()),
                      o->force);
    std::printf("%s: %d tokens, f16 K and V, V %s, %zu bytes (ggsq v3, one sequence)\n",
                printable(o->output).c_str(), s.manifest().geometry.positions, o->layout.c_str(),
                bytes.size());
  });
}

}  // namespace

void register_kv_llamacpp_commands(CLI::App& kv) {
  add_import_llamacpp(kv);
  add_export_llamacpp(kv);
}

}  // namespace ember::cli
