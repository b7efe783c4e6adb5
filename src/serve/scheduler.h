#pragma once
// Continuous batching over one Engine: requests join and leave between steps; each step
// evaluates every active sequence's next tokens (decode tokens first, then prefill chunks
// within a token budget) in one Engine::step. Batch invariance (docs/numerics.md (d)) makes a
// request's tokens and logprobs the same bits whatever shared its steps, and the prefix tiers
// (RAM, then the store) restore rows that equal the cold run's, so a request's output depends
// only on (model, prompt, parameters).
//
// One thread runs the loop and alone touches the engine, the caches and the prefix tiers;
// submit(), cancel and the observers are safe from any thread.
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "model/engine.h"
#include "serve/metrics.h"
#include "serve/prefix_cache.h"
#include "serve/request.h"
#include "store/store.h"

namespace ember::serve {

struct SchedulerOptions {
  int parallel = 4;          // sequences generated at once (slots)
  int queue = 64;            // requests waiting for a slot beyond which submit() refuses
  int step_tokens = 512;     // tokens per engine step; prefill chunks share what decode leaves
  size_t cache_ram = size_t(256) << 20;  // the RAM prefix tier's budget in bytes (0: off)
  store::Store* store = nullptr;         // the shared tier (--store), restored from and saved to
  std::string tokenizer_identity;        // the store's namespace needs it
  // Witness tokens recorded with each state saved to the store (kv/witness.h): each costs one
  // decode step on the scheduler thread, which every batched request waits for, so the
  // server records none unless asked (--store-witness); kv export and ember run record 16.
  int store_witness = 0;
  std::function<bool(int32_t)> is_eog;   // end-of-generation ids
};

// What /slots reports of one slot.
struct SlotState {
  int id = 0;
  bool busy = false;
  int n_past = 0;          // positions in its cache
  int prompt_tokens = 0;
  int generated = 0;
};

class Scheduler {
 public:
  Scheduler(model::Engine& engine, SchedulerOptions options, Metrics& metrics);
  ~Scheduler();  // stop(0)
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request (prompt and max_tokens already checked against the context). False when
  // the queue is full or the scheduler is stopping: the caller answers 503.
  bool submit(const std::shared_ptr<Request>& request);

  // Refuses new requests, lets the queued and running ones finish for up to `grace`, then
  // cancels what is left and joins the loop. Idempotent.
  void stop(std::chrono::milliseconds grace);

  std::vector<SlotState> slots() const;
  int parallel() const { return options_.parallel; }

  // What a slot keeps of its last request, as llama-server's slots do: the tokens evaluated
  // (prompt and generated, all but the last selected) and their K/V rows. Save, restore and
  // erase run on the scheduler thread between steps (Error: no such slot, or none kept).
  struct SlotCache {
    std::vector<int32_t> tokens;
    model::KvCache cache;  // n_pos == tokens.size()
  };
  SlotCache save_slot(int id);
  // The slot keeps `c` and the RAM tier gets its whole blocks, so the next request that starts
  // with these tokens restores them. Returns the positions restored.
  int restore_slot(int id, SlotCache c);
  int erase_slot(int id);  // returns the positions dropped

 private:
  struct Sequence;
  void loop();
  void admit(std::shared_ptr<Request> r, Sequence& s);
  bool run_step();  // false when nothing was active
  void select(Sequence& s, const float* logits);
  void release(Sequence& s, FinishReason reason, const std::string& error = "");
  // Runs fn on the scheduler thread between steps and returns (or rethrows) its result.
  void on_loop(const std::function<void()>& fn);
  void run_tasks();

  model::Engine& engine_;
  SchedulerOptions options_;
  Metrics& metrics_;
  PrefixCache ram_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Request>> queue_;
  std::deque<std::function<void()>> tasks_;
  bool accepting_ = true, stopping_ = false;
  std::vector<std::unique_ptr<Sequence>> seqs_;  // one per slot; mu_ guards the SlotState view
  std::vector<SlotState> view_;
  std::thread thread_;
};

}  // namespace ember::serve
