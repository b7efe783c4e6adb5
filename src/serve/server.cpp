#include "serve/server.h"

#include <httplib.h>

#include <atomic>
#include <mutex>

#include "model/engine.h"
#include "serve/completion.h"
#include "serve/slot_files.h"
#include "util/error.h"

namespace ember::serve {

using nlohmann::json;

namespace {

// Connections up to `max` each get a thread; the ones past it run on a small overflow pool
// where the pre-routing handler answers 503 and closes, so a flood of connections is refused
// quickly instead of queueing without bound.
thread_local bool t_overflow = false;

class BoundedQueue : public httplib::TaskQueue {
 public:
  explicit BoundedQueue(int max) : max_(max), pool_(size_t(max)), overflow_(2) {}
  void enqueue(std::function<void()> fn) override {
    if (open_.fetch_add(1) >= max_) {
      overflow_.enqueue([this, fn = std::move(fn)] {
        t_overflow = true;
        fn();
        t_overflow = false;
        open_.fetch_sub(1);
      });
      return;
    }
    pool_.enqueue([this, fn = std::move(fn)] {
      fn();
      open_.fetch_sub(1);
    });
  }
  void shutdown() override {
    pool_.shutdown();
    overflow_.shutdown();
  }

 private:
  int max_;
  std::atomic<int> open_{0};
  httplib::ThreadPool pool_, overflow_;
};

// Compares without an early exit, so the time taken does not tell how much of a key matched.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

}  // namespace

struct Server::Impl {
  ServedModel model;
  Scheduler& scheduler;
  Metrics& metrics;
  ServerOptions options;
  httplib::Server http;
  std::mutex tokenizer_mu;
  CompletionContext ctx{model, scheduler, metrics, tokenizer_mu};

  Impl(ServedModel m, Scheduler& s, Metrics& met, ServerOptions o)
      : model(std::move(m)), scheduler(s), metrics(met), options(std::move(o)) {}
  void routes();
  json props() const;
  SlotFiles slot_files() const {
    return SlotFiles{options.slot_save_path, model.identity, model.fingerprint,
                     kv::LlamaCppTarget{model.n_layers, model.n_kv_heads, model.head_dim, model.n_ctx, model.n_vocab}};
  }
};

namespace {

void json_reply(httplib::Response& res, const json& j) { res.set_content(dump_json(j), "application/json"); }

}  // namespace

json Server::Impl::props() const {
  return json{{"model_path", model.path},
              {"model_alias", model.id},
              {"total_slots", scheduler.parallel()},
              {"chat_template", model.chat_template_name},
              {"default_generation_settings", {{"n_ctx", model.n_ctx}, {"temperature", 1.0}, {"seed", 0}}},
              {"ember", {{"model_identity", model.identity},
                         {"numerics", model::kNumericsContract},
                         {"engine", model.fingerprint}}}};
}

void Server::Impl::routes() {
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (t_overflow) {
      metrics.requests_rejected.fetch_add(1);
      res.set_header("Retry-After", "1");
      res.set_header("Connection", "close");
      send_error(res, ApiError(503, "server_error",
                               "too many connections (--max-connections " + std::to_string(options.max_connections) + ")",
                               "too_many_connections"));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (!options.api_key.empty() && req.path != "/health") {
      const std::string auth = req.get_header_value("Authorization");
      if (!same_secret(auth, "Bearer " + options.api_key)) {
        send_error(res, ApiError(401, "authentication_error",
                                 "missing or wrong API key (Authorization: Bearer KEY)", "invalid_api_key"));
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  http.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    const int s = res.status;
    const std::string what = s == 404 ? "no such route" : s == 413 ? "request body too large" : s == 405 ? "method not allowed" : "bad request";
    send_error(res, ApiError(s, s == 404 ? "not_found_error" : "invalid_request_error", what));
  });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, ApiError(500, "server_error", what));
  });

  http.Get("/health", [](const httplib::Request&, httplib::Response& res) { json_reply(res, {{"status", "ok"}}); });
  http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    json_reply(res, {{"object", "list"},
                     {"data", json::array({{{"id", model.id},
                                            {"object", "model"},
                                            {"created", 0},
                                            {"owned_by", "ember"},
                                            {"meta", {{"n_ctx", model.n_ctx}, {"n_vocab", model.n_vocab},
                                                      {"model_identity", model.identity},
                                                      {"engine", model.fingerprint}}}}})}});
  });
  http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_completion(ctx, Endpoint::completions, req, res);
  });
  http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_completion(ctx, Endpoint::chat_completions, req, res);
  });
  http.Post("/completion", [this](const httplib::Request& req, httplib::Response& res) {
    handle_completion(ctx, Endpoint::llama_completion, req, res);
  });
  http.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
    try {
      const json j = parse_object(req.body);
      if (!j.contains("content") || !j.at("content").is_string())
        throw ApiError(400, "invalid_request_error", "request: content: expected a string");
      const bool add_special = j.contains("add_special") && j.at("add_special").is_boolean() && j.at("add_special").get<bool>();
      std::vector<int32_t> ids;
      {
        std::lock_guard lock(tokenizer_mu);
        ids = model.tokenizer->encode(j.at("content").get<std::string>(), add_special);
      }
      json_reply(res, {{"tokens", ids}});
    } catch (const ApiError& e) {
      send_error(res, e);
    } catch (const Error& e) {
      send_error(res, ApiError(400, "invalid_request_error", e.what()));
    }
  });
  http.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
    try {
      const json j = parse_object(req.body);
      if (!j.contains("tokens") || !j.at("tokens").is_array())
        throw ApiError(400, "invalid_request_error", "request: tokens: expected an array of token ids");
      std::vector<int32_t> ids;
      for (const json& t : j.at("tokens")) {
        if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= model.n_vocab)
          throw ApiError(400, "invalid_request_error",
                         "request: tokens: expected ids in [0, " + std::to_string(model.n_vocab) + "), found " + t.dump());
        ids.push_back(int32_t(t.get<int64_t>()));
      }
      std::string text;
      {
        std::lock_guard lock(tokenizer_mu);
        text = model.tokenizer->decode(ids);
      }
      json_reply(res, {{"content", text}});
    } catch (const ApiError& e) {
      send_error(res, e);
    } catch (const Error& e) {
      send_error(res, ApiError(400, "invalid_request_error", e.what()));
    }
  });
  http.Get("/props", [this](const httplib::Request&, httplib::Response& res) { json_reply(res, props()); });
  http.Get("/slots", [this](const httplib::Request&, httplib::Response& res) {
    json out = json::array();
    for (const SlotState& s : scheduler.slots())
      out.push_back({{"id", s.id}, {"is_processing", s.busy}, {"n_ctx", model.n_ctx}, {"n_past", s.n_past},
                     {"n_prompt_tokens", s.prompt_tokens}, {"n_decoded", s.generated}});
    json_reply(res, out);
  });
  http.Post(R"(/slots/(\d{1,6}))", [this](const httplib::Request& req, httplib::Response& res) {
    try {
      json_reply(res, slot_action(slot_files(), scheduler, std::stoi(std::string(req.matches[1])),
                                  req.get_param_value("action"), req.body));
    } catch (const ApiError& e) {
      send_error(res, e);
    }
  });
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.render(), "text/plain; version=0.0.4");
  });
}

Server::Server(ServedModel model, Scheduler& scheduler, Metrics& metrics, ServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(model), scheduler, metrics, std::move(options))) {
  const ServerOptions& o = impl_->options;
  if (o.max_connections < 1 || o.max_connections > 4096)
    fail_field("serve", "max connections", "1..4096", std::to_string(o.max_connections));
  if (!impl_->model.tokenizer) fail_field("serve", "tokenizer", "the model's tokenizer", "none");
  const int max = o.max_connections;
  impl_->http.new_task_queue = [max] { return new BoundedQueue(max); };
  impl_->http.set_payload_max_length(o.max_body_bytes);
  impl_->http.set_read_timeout(o.timeout_seconds, 0);
  impl_->http.set_write_timeout(o.timeout_seconds, 0);
  impl_->http.set_keep_alive_max_count(100);
  impl_->routes();
}

Server::~Server() { stop(); }

int Server::bind() {
  const ServerOptions& o = impl_->options;
  int port = o.port;
  if (port == 0) {
    port = impl_->http.bind_to_any_port(o.host);
    if (port < 0) fail_field("serve", "address", "a free port on " + o.host, "none could be bound");
    return port;
  }
  if (!impl_->http.bind_to_port(o.host, port))
    fail_field("serve", "address", "a free port to listen on", o.host + ":" + std::to_string(port) + " (in use or not local)");
  return port;
}

void Server::run() { impl_->http.listen_after_bind(); }

void Server::stop() {
  if (impl_ && impl_->http.is_running()) impl_->http.stop();
}

}  // namespace ember::serve
