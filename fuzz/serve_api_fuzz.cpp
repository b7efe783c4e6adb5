// libFuzzer target for the server's request parser (serve/api.h, docs/serve.md): the bytes of
// one input are an HTTP request body, fed to parse_completion for each endpoint (OpenAI
// completions and chat, llama-server's /completion) and to parse_object (/tokenize,
// /detokenize), exactly what ember serve runs before anything is tokenized. Contract under
// test: any byte string is accepted or refused with an ApiError whose status is 400 and whose
// error body is one line of JSON; it never crashes, hangs or allocates from an unchecked size.
// An accepted request must also respect the limits it was parsed against.
// Seeds: fuzz/corpus/serve/.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "serve/api.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  using namespace ember::serve;
  const ApiLimits limits;
  for (Endpoint ep : {Endpoint::completions, Endpoint::chat_completions, Endpoint::llama_completion}) {
    try {
      const CompletionInput in = parse_completion(body, ep, limits);
      if (in.params.top_logprobs > limits.max_top_logprobs || in.stop.size() > 4 ||
          in.messages.size() > limits.max_messages || (in.prompt && in.prompt->size() > limits.max_prompt_bytes))
        std::abort();  // a limit let through
    } catch (const ApiError& e) {
      const std::string out = error_body(e);
      if (e.status != 400 || out.find('\n') != std::string::npos) std::abort();
    }
  }
  try {
    (void)parse_object(body);
  } catch (const ApiError&) {
  }
  return 0;
}
