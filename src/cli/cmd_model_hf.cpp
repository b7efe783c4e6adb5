// ember model import-hf DIR --output M.gguf (docs/hf.md). Thin over hf/checkpoint.h.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "gguf/arch.h"
#include "gguf/types.h"
#include "hf/checkpoint.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/printable.h"

namespace ember::cli {

void register_model_import_hf(CLI::App& model) {
  struct Opts {
    std::string dir, output, type = "f32";
    bool no_tokenizer = false, force = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* c = model.add_subcommand(
      "import-hf",
      "Convert a Hugging Face " + gguf::arch_names("/") + " checkpoint (config.json + *.safetensors) to GGUF");
  c->add_option("dir", o->dir, "checkpoint directory")->required();
  c->add_option("--output,-o", o->output, "GGUF file to write")->required();
  c->add_option("--type", o->type, "matrices as f32 (default) | f16 | bf16; norms and biases stay f32");
  c->add_flag("--no-tokenizer", o->no_tokenizer, "write no tokenizer metadata (no tokenizer.json needed)");
  c->add_flag("--force", o->force, "replace an existing output");
  c->callback([o] {
    refuse_output_is_input(o->output, {o->dir});
    gguf::TensorType t = gguf::TensorType::F32;
    if (o->type == "f16") t = gguf::TensorType::F16;
    else if (o->type == "bf16") t = gguf::TensorType::BF16;
    else if (o->type != "f32") fail_field("--type", "value", "f32|f16|bf16", o->type);
    const hf::ImportSummary s = hf::import_checkpoint(o->dir, o->output, {t, !o->no_tokenizer}, o->force);
    std::printf("%s: %s, %d layers, %d tensors from %zu file(s), matrices %s", printable(o->output).c_str(),
                s.config.arch.c_str(), s.config.layers, s.tensors, s.source_files.size(), o->type.c_str());
    if (!o->no_tokenizer)
      std::printf(", tokenizer %d tokens (+%d padding to vocab_size)", s.tokenizer_tokens, s.padded_tokens);
    std::printf("\n");
    for (const std::string& n : s.skipped) std::printf("skipped %s (not a weight)\n", printable(n).c_str());
  });
}

}  // namespace ember::cli
