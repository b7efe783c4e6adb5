#pragma once
// The one way a CLI command opens a model and its tokenizer, so every command applies the same
// checks: the --arch assertion, the tokenizer from --tokenizer JSON or the GGUF's own metadata,
// and a tokenizer vocabulary no larger than the model's (an id the model has no row for would
// otherwise reach the embedding lookup).
#include <memory>
#include <string>

#include "model/engine.h"
#include "tokenizer/tokenizer.h"

namespace ember::cli {

struct ModelSource {
  std::string model;      // GGUF path
  std::string tokenizer;  // Hugging Face tokenizer.json; empty: the GGUF's tokenizer metadata
  std::string arch;       // asserted architecture (a name of gguf/arch.h's table); empty: any
};

enum class TokenizerNeed {
  required,  // a command that names prefixes (snapshots, maps): no tokenizer is an error
  optional,  // `run --prompt-ids` works on a GGUF without tokenizer metadata
};

struct LoadedModel {
  std::shared_ptr<const model::Model> model;
  std::unique_ptr<tok::Tokenizer> tokenizer;  // null only with TokenizerNeed::optional
};

LoadedModel load_model(const ModelSource& source, TokenizerNeed need = TokenizerNeed::required);

}  // namespace ember::cli
