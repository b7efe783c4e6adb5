// ember serve: the HTTP server over the batch-invariant engine (docs/serve.md). The command
// loads the model, its tokenizer and chat template, opens the store when asked, wires the
// scheduler and the server, and stops them in order on SIGTERM or SIGINT.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <pthread.h>
#include <string>
#include <thread>

#include "cli/chat_prompt.h"
#include "cli/commands.h"
#include "cli/limits.h"
#include "cli/model_loader.h"
#include "cli/store_flags.h"
#include "kv/snapshot.h"
#include "serve/server.h"
#include "store/store.h"
#include "util/error.h"
#include "util/printable.h"

namespace ember::cli {

namespace {

struct ServeArgs {
  std::string model, tokenizer, host = "127.0.0.1", store, password_file, api_key_file, alias, slot_save_path;
  int port = 8080, parallel = 4, ctx_size = 0, threads = 0, queue = 64, max_connections = 32;
  int timeout = 30, grace_ms = 5000, store_witness = 0;
  size_t cache_ram_mib = 256, max_body_kib = 1024;
  ChatTemplateArgs chat;
};

std::string read_api_key(const std::string& path) {
  const std::string key = secret_first_line(path, "API key");
  for (unsigned char c : key)
    if (c < 0x21 || c > 0x7e) fail_field(path, "API key", "printable ASCII without spaces", "another byte");
  return key;
}

void serve(const ServeArgs& a) {
  // SIGTERM and SIGINT are taken by one thread (sigwait), so every thread started below,
  // the engine's pool and the HTTP threads among them, inherits the blocked mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  LoadedModel loaded = load_model({a.model, a.tokenizer, ""});
  const model::ModelConfig& cfg = loaded.model->config();
  const int threads = resolve_threads(a.threads);
  model::Engine engine(loaded.model, model::EngineOptions{threads, false});
  const int ctx = a.ctx_size > 0 ? std::min(a.ctx_size, engine.position_limit()) : engine.position_limit();

  serve::ServedModel served;
  served.id = a.alias.empty() ? std::filesystem::path(a.model).filename().string() : a.alias;
  served.path = a.model;
  served.identity = loaded.model->identity();
  served.fingerprint = engine.fingerprint();
  served.n_vocab = cfg.n_vocab;
  served.n_ctx = ctx;
  served.n_layers = cfg.n_layers;
  served.n_kv_heads = cfg.n_kv_heads;
  served.head_dim = cfg.head_dim;
  served.tokenizer = loaded.tokenizer.get();
  std::optional<tmpl::ChatTemplate> chat_template;
  ChatTemplateArgs chat = a.chat;
  chat.model = a.model;
  chat.add_generation_prompt = true;
  try {
    chat_template = load_chat_template(chat, "serve");
  } catch (const Error& e) {
    // A base model has no template: completions work, chat answers 400 naming why.
    std::fprintf(stderr, "ember: serve: no chat template (%s); /v1/chat/completions is off\n", printable(e.what()).c_str());
  }
  if (chat_template) {
    const tmpl::RenderOptions ro = render_options(chat);
    const tok::Tokenizer* t = loaded.tokenizer.get();
    const tmpl::ChatTemplate* tp = &*chat_template;
    served.chat = [t, tp, ro](const std::vector<tmpl::Message>& m) { return chat_prompt_ids(*t, *tp, m, ro); };
    served.chat_template_name = tmpl::kind_name(chat_template->kind);
  }

  std::optional<store::Store> store;
  if (!a.store.empty()) store.emplace(store::Store::open(a.store, store_backend_options(a.password_file)));

  serve::Metrics metrics;
  serve::SchedulerOptions so;
  so.parallel = a.parallel;
  so.queue = a.queue;
  so.cache_ram = a.cache_ram_mib << 20;
  so.store = store ? &*store : nullptr;
  so.store_witness = a.store_witness;
  so.tokenizer_identity = loaded.tokenizer->identity();
  const tok::Tokenizer* tk = loaded.tokenizer.get();
  so.is_eog = [tk](int32_t id) { return tk->is_eog(id); };
  serve::Scheduler scheduler(engine, so, metrics);

  serve::ServerOptions opt;
  opt.host = a.host;
  opt.port = a.port;
  if (!a.api_key_file.empty()) opt.api_key = read_api_key(a.api_key_file);
  opt.max_body_bytes = a.max_body_kib << 10;
  opt.max_connections = a.max_connections;
  opt.timeout_seconds = a.timeout;
  opt.slot_save_path = a.slot_save_path;
  serve::Server server(served, scheduler, metrics, opt);
  const int port = server.bind();

  std::atomic<bool> signalled{false};
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    signalled.store(true);
    std::fprintf(stderr, "ember: serve: %s: finishing in-flight requests (up to %d ms)\n",
                 sig == SIGTERM ? "SIGTERM" : "SIGINT", a.grace_ms);
    scheduler.stop(std::chrono::milliseconds(a.grace_ms));
    server.stop();
  });
  // One line a script can wait for (tests read the port from it).
  std::fprintf(stderr, "ember: serve: listening on http://%s:%d (model %s, %d slots, %d threads, ctx %d, %s)\n",
               a.host.c_str(), port, printable(served.id).c_str(), a.parallel, threads, ctx, served.fingerprint.c_str());
  std::fflush(stderr);
  server.run();
  // listen ended: by the signal (the waiter stopped both), or on its own (an error), when
  // the waiter is woken the same way to stop the scheduler.
  if (!signalled.load()) pthread_kill(waiter.native_handle(), SIGTERM);
  waiter.join();
  std::fprintf(stderr, "ember: serve: stopped\n");
}

}  // namespace

void register_serve_command(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server whose outputs are the same bits "
                                              "cold, batched or from a prefix cache (docs/serve.md)");
  cmd->add_option("-m,--model", a->model, "GGUF model file")->required();
  cmd->add_option("--tokenizer", a->tokenizer, "Hugging Face tokenizer.json (default: the GGUF's own)");
  cmd->add_option("--alias", a->alias, "the model name clients send (default: the GGUF's file name)");
  cmd->add_option("--host", a->host, "address to bind (default 127.0.0.1: loopback only)")->capture_default_str();
  cmd->add_option("--port", a->port, "port (0: any free port; the one bound is printed)")
      ->capture_default_str()->check(CLI::Range(0, 65535));
  cmd->add_option("--parallel", a->parallel, "sequences generated at once")->capture_default_str()->check(CLI::Range(1, 256));
  cmd->add_option("-c,--ctx-size", a->ctx_size, "positions per sequence (default: the model's context length)")
      ->check(CLI::NonNegativeNumber);
  add_threads_option(cmd, a->threads);
  cmd->add_option("--queue", a->queue, "requests waiting for a slot before 503")->capture_default_str()->check(CLI::Range(0, 100000));
  cmd->add_option("--cache-ram", a->cache_ram_mib, "RAM prefix cache in MiB (0: off)")->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--store", a->store, "shared prefix store (dir:PATH, redis://HOST:PORT, redis+cluster://...)");
  cmd->add_option("--store-witness", a->store_witness,
                  "witness tokens recorded with each state saved to --store (kv verify --spot runs them again); "
                  "each is one decode step the whole batch waits for")
      ->capture_default_str()
      ->check(CLI::Range(0, kv::kMaxWitnessLength));
  add_password_file_flag(cmd, a->password_file);
  cmd->add_option("--slot-save-path", a->slot_save_path,
                  "directory of POST /slots/{id}?action=save|restore files (llama.cpp sequence states)");
  cmd->add_option("--api-key-file", a->api_key_file, "require 'Authorization: Bearer KEY', KEY the file's first line");
  cmd->add_option("--max-connections", a->max_connections, "connections served at once; more get 503")
      ->capture_default_str()->check(CLI::Range(1, 4096));
  cmd->add_option("--max-body", a->max_body_kib, "largest request body in KiB (413 past it)")->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--timeout", a->timeout, "socket read/write timeout in seconds")->capture_default_str()->check(CLI::Range(1, 3600));
  cmd->add_option("--grace-ms", a->grace_ms, "on SIGTERM, how long in-flight requests may finish")->capture_default_str()
      ->check(CLI::Range(0, 600000));
  cmd->add_option("--tokenizer-config", a->chat.tokenizer_config,
                  "tokenizer_config.json whose chat_template renders chat requests (default: the GGUF's)");
  cmd->add_option("--enable-thinking", a->chat.enable_thinking, "Qwen3's enable_thinking (true|false)")
      ->check(CLI::IsMember({"true", "false"}));
  cmd->add_option("--date-string", a->chat.date_string, "Llama 3.2's date_string (default: today)");
  cmd->callback([a] { serve(*a); });
}

}  // namespace ember::cli
