#include "serve/completion.h"

#include <atomic>
#include <chrono>

#include "model/engine.h"
#include "util/error.h"

namespace ember::serve {

using nlohmann::json;

namespace {

std::atomic<uint64_t> g_next_id{1};

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A tokenized, checked request ready to queue.
struct Prepared {
  CompletionInput in;
  std::vector<int32_t> prompt;
  std::string id;
  int64_t created = 0;
};

Prepared prepare(CompletionContext& ctx, Endpoint endpoint, const std::string& body) {
  Prepared p;
  p.in = parse_completion(body, endpoint);
  const ServedModel& m = ctx.model;
  if (!p.in.model.empty() && p.in.model != m.id)
    throw ApiError(404, "invalid_request_error",
                   "request: model: expected '" + m.id + "' (GET /v1/models), found '" + p.in.model + "'",
                   "model_not_found");
  {
    std::lock_guard lock(ctx.tokenizer_mu);
    try {
      if (endpoint == Endpoint::chat_completions) {
        if (!m.chat) throw ApiError(400, "invalid_request_error", "request: messages: the model has no chat template");
        p.prompt = m.chat(p.in.messages);
      } else if (p.in.prompt) {
        p.prompt = m.tokenizer->encode(*p.in.prompt, m.tokenizer->add_bos_default());
      } else {
        p.prompt = p.in.prompt_ids;
      }
    } catch (const Error& e) {
      throw ApiError(400, "invalid_request_error", e.what());
    }
  }
  if (p.prompt.empty()) throw ApiError(400, "invalid_request_error", "request: prompt: expected at least one token, found none");
  for (int32_t id : p.prompt)
    if (id < 0 || id >= m.n_vocab)
      throw ApiError(400, "invalid_request_error",
                     "request: prompt: expected token ids below " + std::to_string(m.n_vocab) + ", found " +
                         std::to_string(id));
  const int L = int(p.prompt.size());
  if (L >= m.n_ctx)
    throw ApiError(400, "invalid_request_error",
                   "request: prompt: expected fewer than " + std::to_string(m.n_ctx) +
                       " tokens (the context size, --ctx-size), found " + std::to_string(L),
                   "context_length_exceeded");
  // max_tokens is bounded by the context: the prompt and every generated token but the last
  // are evaluated, at positions below n_ctx.
  const int room = m.n_ctx - L + 1;
  int& max_tokens = p.in.params.max_tokens;
  // Not given: OpenAI's completions default to 16 tokens, chat and llama-server's /completion
  // run to the end of generation or of the context.
  if (max_tokens <= 0) max_tokens = endpoint == Endpoint::completions ? 16 : room;
  max_tokens = std::min(max_tokens, room);
  p.id = std::to_string(g_next_id.fetch_add(1));
  p.created = unix_now();
  return p;
}

// The text of one token as logprobs name it (its bytes; invalid UTF-8 replaced on output).
json token_logprob(const tok::Tokenizer& t, const TokenLogprob& lp, bool chat) {
  const std::string bytes = t.token_bytes(lp.token);
  json j = {{"token", bytes}, {"logprob", lp.logprob}};
  if (chat) {
    json b = json::array();
    for (unsigned char c : bytes) b.push_back(int(c));
    j["bytes"] = b;
  }
  return j;
}

// OpenAI's logprobs object for the events given: completions' parallel arrays, or chat's
// content list.
json logprobs_json(const tok::Tokenizer& t, const std::vector<TokenEvent>& events, bool chat, size_t text_offset) {
  if (chat) {
    json content = json::array();
    for (const TokenEvent& e : events) {
      json c = token_logprob(t, *e.chosen, true);
      json top = json::array();
      for (const TokenLogprob& lp : e.top) top.push_back(token_logprob(t, lp, true));
      c["top_logprobs"] = top;
      content.push_back(c);
    }
    return json{{"content", content}};
  }
  json tokens = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  size_t offset = text_offset;
  for (const TokenEvent& e : events) {
    const std::string bytes = t.token_bytes(e.token);
    tokens.push_back(bytes);
    lps.push_back(e.chosen->logprob);
    json top = json::object();
    for (const TokenLogprob& lp : e.top) top[t.token_bytes(lp.token)] = lp.logprob;
    tops.push_back(top);
    offsets.push_back(offset);
    offset += bytes.size();
  }
  return json{{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

// What every generation response carries beyond OpenAI's fields: how to check it.
json provenance(const ServedModel& m, const Request& r) {
  return json{{"model_identity", m.identity},
              {"numerics", model::kNumericsContract},
              {"engine", m.fingerprint},
              {"prefix", {{"tokens", r.cached_tokens()}, {"tier", tier_name(r.tier())}}}};
}

json usage(const Request& r, int completion_tokens) {
  const int L = int(r.prompt().size());
  return json{{"prompt_tokens", L},
              {"completion_tokens", completion_tokens},
              {"total_tokens", L + completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", r.cached_tokens()}}}};
}

const char* openai_finish(FinishReason r, bool stopped_by_string) {
  if (stopped_by_string) return "stop";
  return r == FinishReason::length ? "length" : "stop";
}

// Reads the request's tokens, decodes them, applies the stop strings, and hands each piece of
// text (with the events it came from) to `deliver`; deliver returns false when the client is
// gone. Returns the number of tokens consumed.
struct Collected {
  int tokens = 0;
  bool stopped_by_string = false;
  bool client_gone = false;
};

Collected collect(const tok::Tokenizer& t, Request& r, const std::vector<std::string>& stops,
                  const std::function<bool(const std::string&, std::vector<TokenEvent>&&)>& deliver) {
  Collected c;
  tok::StreamDecoder decoder(t);
  StopFilter filter(stops);
  TokenEvent e;
  std::vector<TokenEvent> batch;
  while (r.next(e)) {
    ++c.tokens;
    const std::string text = filter.push(decoder.push(e.token));
    batch.push_back(std::move(e));
    if (filter.stopped()) {
      c.stopped_by_string = true;
      r.cancel();
      if (!deliver(text, std::move(batch))) c.client_gone = true;
      return c;
    }
    if (!text.empty() || r.params().top_logprobs >= 0) {
      if (!deliver(text, std::move(batch))) {
        c.client_gone = true;
        r.cancel();
        return c;
      }
      batch.clear();
    }
  }
  const std::string tail = filter.push(decoder.flush()) + filter.flush();
  if (!tail.empty() || !batch.empty()) {
    if (!deliver(tail, std::move(batch))) c.client_gone = true;
  }
  return c;
}

ApiError finished_badly(const Request& r) {
  if (r.finish_reason() == FinishReason::error)
    return ApiError(500, "server_error", "generation failed: " + r.error());
  return ApiError(503, "server_error", "the server is shutting down; the request was not finished");
}

json choice_json(Endpoint ep, const std::string& text, const json& logprobs, const char* finish) {
  if (ep == Endpoint::chat_completions)
    return json{{"index", 0},
                {"message", {{"role", "assistant"}, {"content", text}}},
                {"logprobs", logprobs},
                {"finish_reason", finish}};
  return json{{"index", 0}, {"text", text}, {"logprobs", logprobs}, {"finish_reason", finish}};
}

void respond_whole(CompletionContext& ctx, Prepared& p, const std::shared_ptr<Request>& r, httplib::Response& res) {
  const ServedModel& m = ctx.model;
  std::string text = p.in.echo && p.in.prompt ? *p.in.prompt : "";
  const size_t echo_bytes = text.size();
  std::vector<TokenEvent> events;
  const Collected c = collect(*m.tokenizer, *r, p.in.stop, [&](const std::string& piece, std::vector<TokenEvent>&& ev) {
    text += piece;
    for (TokenEvent& e : ev) events.push_back(std::move(e));
    return true;
  });
  if (!c.stopped_by_string && (r->finish_reason() == FinishReason::error || r->finish_reason() == FinishReason::cancelled))
    throw finished_badly(*r);
  const bool chat = p.in.endpoint == Endpoint::chat_completions;
  const char* finish = openai_finish(r->finish_reason(), c.stopped_by_string);
  json body;
  if (p.in.endpoint == Endpoint::llama_completion) {
    json probs = json::array();
    for (const TokenEvent& e : events) {
      json top = json::array();
      for (const TokenLogprob& lp : e.top) top.push_back({{"tok_str", m.tokenizer->token_bytes(lp.token)}, {"prob", std::exp(double(lp.logprob))}});
      probs.push_back({{"content", m.tokenizer->token_bytes(e.token)}, {"probs", top}});
    }
    body = {{"content", text},
            {"model", m.id},
            {"stop", true},
            {"stopped_eos", r->finish_reason() == FinishReason::stop && !c.stopped_by_string},
            {"stopped_limit", r->finish_reason() == FinishReason::length},
            {"stopped_word", c.stopped_by_string},
            {"tokens_predicted", c.tokens},
            {"tokens_evaluated", r->prompt().size()},
            {"tokens_cached", r->cached_tokens()},
            {"ember", provenance(m, *r)}};
    if (p.in.params.top_logprobs >= 0) body["completion_probabilities"] = probs;
    json ids = json::array();
    if (p.in.return_tokens)
      for (const TokenEvent& e : events) ids.push_back(e.token);
    body["tokens"] = ids;  // llama-server's field: empty unless return_tokens
  } else {
    const json lp = p.in.params.top_logprobs >= 0 ? logprobs_json(*m.tokenizer, events, chat, echo_bytes) : json(nullptr);
    body = {{"id", std::string(chat ? "chatcmpl-" : "cmpl-") + p.id},
            {"object", chat ? "chat.completion" : "text_completion"},
            {"created", p.created},
            {"model", m.id},
            {"system_fingerprint", m.fingerprint},
            {"choices", json::array({choice_json(p.in.endpoint, text, lp, finish)})},
            {"usage", usage(*r, c.tokens)},
            {"ember", provenance(m, *r)}};
  }
  res.status = 200;
  res.set_content(dump_json(body), "application/json");
}

void respond_stream(CompletionContext& ctx, Prepared p, std::shared_ptr<Request> r, httplib::Response& res) {
  CompletionContext* c = &ctx;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [c, p = std::move(p), r](size_t, httplib::DataSink& sink) {
        const ServedModel& m = c->model;
        const bool chat = p.in.endpoint == Endpoint::chat_completions;
        const bool llama = p.in.endpoint == Endpoint::llama_completion;
        auto send = [&](const json& j) {
          const std::string line = "data: " + dump_json(j) + "\n\n";
          return sink.is_writable() && sink.write(line.data(), line.size());
        };
        auto chunk = [&](json choice) {
          return json{{"id", std::string(chat ? "chatcmpl-" : "cmpl-") + p.id},
                      {"object", chat ? "chat.completion.chunk" : "text_completion"},
                      {"created", p.created},
                      {"model", m.id},
                      {"system_fingerprint", m.fingerprint},
                      {"choices", json::array({std::move(choice)})}};
        };
        if (chat && !send(chunk({{"index", 0}, {"delta", {{"role", "assistant"}, {"content", ""}}},
                                {"logprobs", nullptr}, {"finish_reason", nullptr}}))) {
          r->cancel();
          return false;
        }
        size_t offset = p.in.echo && p.in.prompt ? p.in.prompt->size() : 0;
        if (!chat && !llama && p.in.echo && p.in.prompt &&
            !send(chunk({{"index", 0}, {"text", *p.in.prompt}, {"logprobs", nullptr}, {"finish_reason", nullptr}}))) {
          r->cancel();
          return false;
        }
        const Collected got = collect(*m.tokenizer, *r, p.in.stop, [&](const std::string& piece, std::vector<TokenEvent>&& ev) {
          const json lp = p.in.params.top_logprobs >= 0 ? logprobs_json(*m.tokenizer, ev, chat, offset) : json(nullptr);
          offset += piece.size();
          if (llama) return send({{"content", piece}, {"stop", false}});
          json choice = chat ? json{{"index", 0}, {"delta", {{"content", piece}}}, {"logprobs", lp}, {"finish_reason", nullptr}}
                             : json{{"index", 0}, {"text", piece}, {"logprobs", lp}, {"finish_reason", nullptr}};
          return send(chunk(std::move(choice)));
        });
        if (got.client_gone) return false;  // the request was cancelled; its sequence is freed
        if (!got.stopped_by_string &&
            (r->finish_reason() == FinishReason::error || r->finish_reason() == FinishReason::cancelled)) {
          send(json::parse(error_body(finished_badly(*r))));
          sink.done();
          return true;
        }
        const char* finish = openai_finish(r->finish_reason(), got.stopped_by_string);
        if (llama) {
          send({{"content", ""}, {"stop", true}, {"tokens_predicted", got.tokens},
                {"tokens_evaluated", r->prompt().size()}, {"tokens_cached", r->cached_tokens()},
                {"stopped_word", got.stopped_by_string}, {"ember", provenance(m, *r)}});
          sink.done();
          return true;
        }
        json last = chat ? json{{"index", 0}, {"delta", json::object()}, {"logprobs", nullptr}, {"finish_reason", finish}}
                         : json{{"index", 0}, {"text", ""}, {"logprobs", nullptr}, {"finish_reason", finish}};
        json final_chunk = chunk(std::move(last));
        final_chunk["ember"] = provenance(m, *r);
        send(final_chunk);
        if (p.in.include_usage) {
          json u = chunk(json());
          u["choices"] = json::array();
          u["usage"] = usage(*r, got.tokens);
          send(u);
        }
        const std::string done = "data: [DONE]\n\n";
        sink.write(done.data(), done.size());
        sink.done();
        return true;
      },
      [r](bool) { r->cancel(); });  // a no-op once finished; frees the sequence if the client left
}

}  // namespace

std::string dump_json(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(error_body(e), "application/json");
}

void handle_completion(CompletionContext& ctx, Endpoint endpoint, const httplib::Request& req, httplib::Response& res) {
  try {
    Prepared p = prepare(ctx, endpoint, req.body);
    auto r = std::make_shared<Request>(p.prompt, p.in.params);
    if (!ctx.scheduler.submit(r)) {
      res.set_header("Retry-After", "1");
      throw ApiError(503, "server_error", "the request queue is full (--queue); retry later", "queue_full");
    }
    if (p.in.stream) respond_stream(ctx, std::move(p), r, res);
    else respond_whole(ctx, p, r, res);
  } catch (const ApiError& e) {
    ctx.metrics.requests_rejected.fetch_add(1);
    send_error(res, e);
  }
}

}  // namespace ember::serve
