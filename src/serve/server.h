#pragma once
// `ember serve`: the HTTP front of the scheduler (docs/serve.md). OpenAI's /v1/models,
// /v1/completions and /v1/chat/completions (SSE streaming included), llama-server's
// /completion, /tokenize, /detokenize, /health, /props and /slots, and /metrics in Prometheus
// text. Every generation response says what makes it checkable: the model identity, the
// numerics contract, the engine fingerprint, and how many prompt tokens were restored from
// which tier.
//
// On cpp-httplib (Debian's libcpp-httplib-dev, what llama-server uses): one thread per
// connection up to max_connections, past which a connection gets 503 and is closed; bodies
// over max_body_bytes get 413; with an API key, every route but /health needs
// "Authorization: Bearer KEY" (401 otherwise). Errors use OpenAI's error shape.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "serve/metrics.h"
#include "serve/scheduler.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace ember::serve {

// What the server serves, as its responses name it.
struct ServedModel {
  std::string id;           // the name requests give as "model" (the GGUF's file name)
  std::string path;         // the GGUF path (/props)
  std::string identity;     // ember's model identity hash (docs/identity.md)
  std::string fingerprint;  // the engine fingerprint ("canonical-v1;weights=...")
  int n_vocab = 0;
  int n_ctx = 0;            // positions a sequence may reach (--ctx-size, at most the model's)
  int n_layers = 0, n_kv_heads = 0, head_dim = 0;  // the cache geometry (slot files)
  const tok::Tokenizer* tokenizer = nullptr;
  // Messages -> prompt ids through the model's chat template; null: chat is refused (400).
  std::function<std::vector<int32_t>(const std::vector<tmpl::Message>&)> chat;
  std::string chat_template_name;
};

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                  // 0: any free port (bound_port() says which)
  std::string api_key;              // "": no authentication
  size_t max_body_bytes = size_t(1) << 20;
  int max_connections = 32;
  int timeout_seconds = 30;         // socket read/write timeout: a stalled client is dropped
  std::string slot_save_path;       // POST /slots/{id}?action=save|restore (llama.cpp state files)
};

class Server {
 public:
  Server(ServedModel model, Scheduler& scheduler, Metrics& metrics, ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the socket; Error naming the address when it cannot. Returns the port.
  int bind();
  // Serves until stop(); call after bind().
  void run();
  // Stops accepting and returns once listening ended; safe from another thread.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ember::serve
