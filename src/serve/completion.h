#pragma once
// One completion request from body to response: parse (api.h), tokenize, check against the
// context, queue on the scheduler, then collect the tokens into OpenAI's or llama-server's
// response, or stream them as server-sent events. Internal to serve/ (server.cpp routes here).
#include <mutex>

#include <httplib.h>

#include "serve/api.h"
#include "serve/metrics.h"
#include "serve/scheduler.h"
#include "serve/server.h"

namespace ember::serve {

struct CompletionContext {
  const ServedModel& model;
  Scheduler& scheduler;
  Metrics& metrics;
  std::mutex& tokenizer_mu;  // the tokenizer is used by one HTTP thread at a time
};

// Writes the response (or an error in OpenAI's shape) into res.
void handle_completion(CompletionContext& ctx, Endpoint endpoint, const httplib::Request& req,
                       httplib::Response& res);

// res = status + OpenAI's error body.
void send_error(httplib::Response& res, const ApiError& e);

// nlohmann's dump with invalid UTF-8 replaced (token pieces may split a character).
std::string dump_json(const nlohmann::json& j);

}  // namespace ember::serve
