#pragma once
// Shared tokenizers for the tokenizer tests: each is loaded once per test executable.
#include <memory>
#include <string>

#include "tokenizer/spec.h"
#include "tokenizer/tokenizer.h"

namespace ember::test {

// The qwen3 spec is parsed once and shared (loading a 150k-token tokenizer.json costs ~0.5 s).
const tok::TokenizerSpec& qwen3_spec();
const tok::Tokenizer& qwen3_tokenizer();   // shared/tokenizer/qwen3/tokenizer.json (from qwen3_spec)
const tok::Tokenizer& llama3_tokenizer();  // shared/tokenizer/llama3/tokenizer.json (from_json_file)

}  // namespace ember::test
