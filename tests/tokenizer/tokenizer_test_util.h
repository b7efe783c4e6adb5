#pragma once
// Shared tokenizers for the tokenizer tests: each is loaded once per test executable.
#include <memory>
#include <string>

#include "tokenizer/tokenizer.h"

namespace ember::test {

const tok::Tokenizer& qwen3_tokenizer();   // shared/tokenizer/qwen3/tokenizer.json
const tok::Tokenizer& llama3_tokenizer();  // shared/tokenizer/llama3/tokenizer.json

}  // namespace ember::test
