#pragma once
// The request side of the server's HTTP API (docs/serve.md): OpenAI's /v1/completions and
// /v1/chat/completions bodies and llama-server's /completion, parsed and checked into one
// CompletionInput. Pure functions of the body (no engine, no tokenizer), so the fuzz target
// drives exactly what the server runs. Every problem is an ApiError carrying the HTTP status
// and OpenAI's error shape.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/request.h"
#include "template/chat_template.h"

namespace ember::serve {

// {"error": {"message", "type", "param", "code"}} with an HTTP status.
struct ApiError : std::runtime_error {
  ApiError(int http_status, std::string error_type, const std::string& message, std::string error_code = "")
      : std::runtime_error(message), status(http_status), type(std::move(error_type)), code(std::move(error_code)) {}
  int status;
  std::string type;  // invalid_request_error, authentication_error, server_error, ...
  std::string code;  // "" or a short machine name (model_not_found, context_length_exceeded, ...)
};
std::string error_body(const ApiError& e);

enum class Endpoint {
  completions,       // POST /v1/completions
  chat_completions,  // POST /v1/chat/completions
  llama_completion,  // POST /completion (llama-server)
};

struct CompletionInput {
  Endpoint endpoint = Endpoint::completions;
  std::string model;                    // "" when not given (llama-server's /completion)
  std::optional<std::string> prompt;    // text (completions)
  std::vector<int32_t> prompt_ids;      // token ids given as the prompt (completions)
  std::vector<tmpl::Message> messages;  // chat
  GenerationParams params;              // max_tokens 0: not given (the context bounds it)
  bool stream = false;
  bool include_usage = false;           // stream_options.include_usage
  std::vector<std::string> stop;        // up to 4 strings
  bool echo = false;                    // completions: prepend the prompt text
  bool return_tokens = false;           // llama-server's /completion: the generated ids too
};

// Limits a body is checked against before anything is tokenized.
struct ApiLimits {
  size_t max_prompt_bytes = size_t(4) << 20;
  size_t max_messages = 1024;
  int max_top_logprobs = 20;
};

// Parses and checks a request body. ApiError(400) naming the field on malformed JSON, a wrong
// type, an unknown field, a value out of range or an unsupported option.
CompletionInput parse_completion(const std::string& body, Endpoint endpoint, const ApiLimits& limits = {});

// A JSON object body (/tokenize, /detokenize): ApiError(400) unless the body is one.
nlohmann::json parse_object(const std::string& body);

// A stop-sequence filter over streamed text: text is released only once it can no longer be
// the start of a stop string, and everything from the first stop string on is dropped.
class StopFilter {
 public:
  explicit StopFilter(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  // The text that can be sent now.
  std::string push(const std::string& text);
  // The held-back tail at the end of generation (nothing once stopped).
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace ember::serve
