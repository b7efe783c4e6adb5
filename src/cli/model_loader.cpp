#include "cli/model_loader.h"

#include "util/error.h"

namespace ember::cli {

LoadedModel load_model(const ModelSource& source, TokenizerNeed need) {
  LoadedModel l;
  l.model = model::Model::load(source.model);
  const model::ModelConfig& cfg = l.model->config();
  if (!source.arch.empty()) {
    const model::Arch want = model::parse_arch(source.arch);
    if (want != cfg.arch)
      fail_field(source.model, "architecture", std::string(model::arch_name(want)) + " (--arch)",
                 model::arch_name(cfg.arch));
  }
  if (!source.tokenizer.empty()) {
    l.tokenizer = tok::Tokenizer::from_json_file(source.tokenizer);
  } else if (l.model->file().has("tokenizer.ggml.model")) {
    l.tokenizer = tok::Tokenizer::from_gguf(l.model->file());
  } else if (need == TokenizerNeed::required) {
    // A snapshot or a map names its tokenizer; without one the prefix has no identity.
    fail_field(source.model, "tokenizer", "tokenizer metadata in the GGUF or --tokenizer JSON", "none");
  }
  if (l.tokenizer && l.tokenizer->n_vocab() > cfg.n_vocab)
    fail_field(source.tokenizer.empty() ? source.model : source.tokenizer, "tokenizer vocabulary",
               "at most the model's " + std::to_string(cfg.n_vocab) + " tokens",
               std::to_string(l.tokenizer->n_vocab()));
  return l;
}

}  // namespace ember::cli
