#include "serve/scheduler.h"

#include <algorithm>
#include <cmath>

#include "store/prefix.h"
#include "util/error.h"

namespace ember::serve {

namespace {

using clock = std::chrono::steady_clock;

// log softmax in f64 of the f32 logits: the chosen token's and the top n (ties: lower id).
void fill_logprobs(const float* logits, int V, int32_t chosen, int top, TokenEvent& e) {
  double m = -INFINITY;
  for (int i = 0; i < V; ++i) m = std::max(m, double(logits[i]));
  double sum = 0.0;
  for (int i = 0; i < V; ++i) sum += std::exp(double(logits[i]) - m);
  const double log_z = m + std::log(sum);
  auto lp = [&](int32_t id) { return float(double(logits[id]) - log_z); };
  e.chosen = TokenLogprob{chosen, lp(chosen)};
  if (top <= 0) return;
  std::vector<int32_t> ids(static_cast<size_t>(V));
  for (int i = 0; i < V; ++i) ids[size_t(i)] = i;
  const size_t n = std::min<size_t>(size_t(top), ids.size());
  std::partial_sort(ids.begin(), ids.begin() + long(n), ids.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  for (size_t i = 0; i < n; ++i) e.top.push_back({ids[i], lp(ids[i])});
}

}  // namespace

struct Scheduler::Sequence {
  std::shared_ptr<Request> req;
  model::KvCache cache;
  std::vector<int32_t> pending;  // tokens still to evaluate: the prompt's rest, or the last selected
  size_t pending_at = 0;
  std::unique_ptr<model::Sampler> sampler;
  std::vector<int32_t> generated;
  int limit = 0;                 // tokens to select at most
  clock::time_point last_token;
  std::vector<float> boundary;   // the first selection's logits, when the store is saved to
  SlotCache kept;                // the last request's evaluated tokens and rows (save_slot)
  bool active() const { return req != nullptr; }
};

Scheduler::Scheduler(model::Engine& engine, SchedulerOptions options, Metrics& metrics)
    : engine_(engine), options_(std::move(options)), metrics_(metrics), ram_(options_.cache_ram) {
  if (options_.parallel < 1 || options_.parallel > 256)
    fail_field("serve", "parallel", "1..256 sequences", std::to_string(options_.parallel));
  if (options_.step_tokens < 1) fail_field("serve", "step tokens", ">= 1", std::to_string(options_.step_tokens));
  for (int i = 0; i < options_.parallel; ++i) {
    seqs_.push_back(std::make_unique<Sequence>());
    view_.push_back(SlotState{i});
  }
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() { stop(std::chrono::milliseconds(0)); }

bool Scheduler::submit(const std::shared_ptr<Request>& request) {
  {
    std::lock_guard lock(mu_);
    if (!accepting_ || queue_.size() >= size_t(std::max(0, options_.queue))) return false;
    request->submitted_at = clock::now();
    queue_.push_back(request);
    metrics_.queue_depth.store(int64_t(queue_.size()));
  }
  metrics_.requests.fetch_add(1);
  cv_.notify_all();
  return true;
}

void Scheduler::stop(std::chrono::milliseconds grace) {
  {
    std::lock_guard lock(mu_);
    if (!thread_.joinable()) return;
    accepting_ = false;
  }
  const auto deadline = clock::now() + grace;
  {
    std::unique_lock lock(mu_);
    cv_.wait_until(lock, deadline, [&] {
      if (!queue_.empty()) return false;
      for (const SlotState& v : view_)
        if (v.busy) return false;
      return true;
    });
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::vector<SlotState> Scheduler::slots() const {
  std::lock_guard lock(mu_);
  return view_;
}

void Scheduler::admit(std::shared_ptr<Request> r, Sequence& s) {
  const std::vector<int32_t>& prompt = r->prompt();
  const int L = int(prompt.size());
  // Room for the prompt now; the engine grows the cache as tokens come.
  s.cache = engine_.new_cache(L);
  // At least one prompt token is computed, so the first selection's logits are the engine's.
  int restored = ram_.restore(prompt, L - 1, s.cache);
  Tier tier = restored > 0 ? Tier::ram : Tier::none;
  const int store_could = (L - 1) / PrefixCache::kBlock * PrefixCache::kBlock;
  if (options_.store && restored < store_could) {
    try {
      store::PrefixRestore p = store::restore_longest_prefix(*options_.store, engine_, options_.tokenizer_identity,
                                                            prompt, store::OnBadState::recompute);
      if (p.restored > restored) {
        s.cache = std::move(p.cache);
        restored = p.restored;
        tier = Tier::store;
      }
      // A state found but refused (a bad chunk, a wrong seal) is recomputed and reported as
      // "store miss (recomputing ...)": counted as a store error, unlike a plain miss.
      if (p.restored == 0 && p.report.rfind("store miss (", 0) == 0) metrics_.store_errors.fetch_add(1);
    } catch (const std::exception&) {
      // The store is a cache: unreachable or refusing, the prefix is computed instead.
      metrics_.store_errors.fetch_add(1);
    }
  }
  s.cache.n_pos = restored;
  r->restored(restored, tier);
  metrics_.prefix_hits[size_t(tier)].fetch_add(1);
  s.pending.assign(prompt.begin() + restored, prompt.end());
  s.pending_at = 0;
  s.sampler = std::make_unique<model::Sampler>(r->params().sampling);
  s.generated.clear();
  s.limit = r->params().max_tokens;
  s.req = std::move(r);
}

void Scheduler::release(Sequence& s, FinishReason reason, const std::string& error) {
  const Request& r = *s.req;
  // The prompt and what was generated after it (all but the last selected token, which was
  // never evaluated) become a RAM prefix: a follow-up turn of a chat starts with them.
  if (reason != FinishReason::error && s.cache.n_pos >= int(r.prompt().size())) {
    std::vector<int32_t> held = r.prompt();
    held.insert(held.end(), s.generated.begin(), s.generated.end());
    held.resize(size_t(s.cache.n_pos));
    ram_.insert(held, s.cache);
    s.kept.tokens = std::move(held);
    s.kept.cache = std::move(s.cache);
    if (options_.store && r.tier() != Tier::store && r.prompt().size() > size_t(PrefixCache::kBlock)) {
      try {
        // Sealed as `kv export` seals the prompt's state; its resume token is the greedy choice
        // from the boundary logits (the first selection's), kept for this.
        store::save_prefill(*options_.store, engine_, options_.tokenizer_identity, r.prompt(), s.kept.cache, s.boundary,
                            "ember serve", {}, options_.store_witness);
      } catch (const std::exception&) {
        metrics_.store_errors.fetch_add(1);
      }
    }
  }
  metrics_.prompt_tokens.fetch_add(r.prompt().size());
  metrics_.prompt_tokens_cached.fetch_add(uint64_t(r.cached_tokens()));
  if (reason == FinishReason::cancelled) metrics_.requests_cancelled.fetch_add(1);
  s.req->finish(reason, error);
  s.req.reset();
  s.cache = model::KvCache();
  s.sampler.reset();
  s.boundary.clear();
}

void Scheduler::select(Sequence& s, const float* logits) {
  const int V = engine_.config().n_vocab;
  const GenerationParams& p = s.req->params();
  TokenEvent e;
  e.token = s.sampler->select(logits, V);
  if (p.top_logprobs >= 0) fill_logprobs(logits, V, e.token, p.top_logprobs, e);
  const auto now = clock::now();
  if (s.generated.empty() && options_.store) s.boundary.assign(logits, logits + V);
  if (s.generated.empty()) metrics_.ttft.observe(std::chrono::duration<double>(now - s.req->submitted_at).count());
  else metrics_.token_latency.observe(std::chrono::duration<double>(now - s.last_token).count());
  s.last_token = now;
  metrics_.generated_tokens.fetch_add(1);
  const int32_t token = e.token;
  s.generated.push_back(token);
  const bool eog = !p.ignore_eos && options_.is_eog && options_.is_eog(token);
  if (eog) {  // the end-of-generation token is not text: it ends the request
    release(s, FinishReason::stop);
    return;
  }
  s.req->push(std::move(e));
  if (int(s.generated.size()) >= s.limit || s.cache.n_pos + 1 > engine_.position_limit()) {
    release(s, FinishReason::length);
    return;
  }
  s.pending.assign(1, token);
  s.pending_at = 0;
}

bool Scheduler::run_step() {
  // Cancelled sequences leave first; then decode tokens, then prefill chunks in slot order.
  std::vector<model::SequenceStep> steps;
  std::vector<Sequence*> owners;
  int budget = options_.step_tokens;
  for (auto& sp : seqs_) {
    Sequence& s = *sp;
    if (s.active() && s.req->cancelled()) release(s, FinishReason::cancelled);
  }
  for (int pass = 0; pass < 2; ++pass)
    for (auto& sp : seqs_) {
      Sequence& s = *sp;
      if (!s.active()) continue;
      const size_t left = s.pending.size() - s.pending_at;
      const bool decode = left == 1 && !s.generated.empty();
      if ((pass == 0) != decode || (pass == 1 && budget <= 0)) continue;
      const size_t n = decode ? 1 : std::min<size_t>(left, size_t(std::max(budget, 1)));
      steps.push_back({&s.cache, std::span(s.pending.data() + s.pending_at, n), n == left});
      owners.push_back(&s);
      budget -= int(n);
    }
  if (steps.empty()) return false;
  std::vector<float> logits;
  try {
    logits = engine_.step(steps);
  } catch (const std::exception& e) {
    // Every check runs before anything is evaluated; a refusal here is a request the HTTP
    // side let through: each sequence of the step ends with the error, the server goes on.
    for (Sequence* s : owners) release(*s, FinishReason::error, e.what());
    return true;
  }
  metrics_.steps.fetch_add(1);
  metrics_.batch_size.observe(double(steps.size()));
  const int V = engine_.config().n_vocab;
  size_t row = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    Sequence& s = *owners[i];
    metrics_.step_tokens.fetch_add(steps[i].tokens.size());
    s.pending_at += steps[i].tokens.size();
    if (!steps[i].want_logits) continue;
    select(s, logits.data() + row * size_t(V));
    ++row;
  }
  return true;
}

void Scheduler::loop() {
  for (;;) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] {
        if (stopping_ || !queue_.empty() || !tasks_.empty()) return true;
        for (const auto& s : seqs_)
          if (s->active()) return true;
        return false;
      });
      if (stopping_) break;
    }
    run_tasks();
    // Admit into free slots (outside the lock: a store lookup may take a while).
    for (auto& sp : seqs_) {
      if (sp->active()) continue;
      std::shared_ptr<Request> r;
      {
        std::lock_guard lock(mu_);
        if (queue_.empty()) break;
        r = queue_.front();
        queue_.pop_front();
        metrics_.queue_depth.store(int64_t(queue_.size()));
      }
      if (r->cancelled()) {
        metrics_.requests_cancelled.fetch_add(1);
        r->finish(FinishReason::cancelled);
        continue;
      }
      admit(std::move(r), *sp);
    }
    run_step();
    {
      std::lock_guard lock(mu_);
      int active = 0;
      for (size_t i = 0; i < seqs_.size(); ++i) {
        const Sequence& s = *seqs_[i];
        view_[i].busy = s.active();
        view_[i].n_past = s.active() ? s.cache.n_pos : 0;
        view_[i].prompt_tokens = s.active() ? int(s.req->prompt().size()) : 0;
        view_[i].generated = s.active() ? int(s.generated.size()) : 0;
        active += s.active();
      }
      metrics_.active_sequences.store(active);
    }
    cv_.notify_all();  // stop() waits for the slots to drain
  }
  for (auto& sp : seqs_)
    if (sp->active()) release(*sp, FinishReason::cancelled);
  run_tasks();
  std::lock_guard lock(mu_);
  for (auto& r : queue_) r->finish(FinishReason::cancelled);
  queue_.clear();
}

void Scheduler::run_tasks() {
  for (;;) {
    std::function<void()> task;
    {
      std::lock_guard lock(mu_);
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

void Scheduler::on_loop(const std::function<void()>& fn) {
  std::mutex done_mu;
  std::condition_variable done_cv;
  bool done = false;
  std::exception_ptr error;
  {
    std::lock_guard lock(mu_);
    if (stopping_ || !thread_.joinable()) fail("serve", "the scheduler is stopping");
    tasks_.push_back([&] {
      try {
        fn();
      } catch (...) {
        error = std::current_exception();
      }
      std::lock_guard l(done_mu);
      done = true;
      done_cv.notify_all();
    });
  }
  cv_.notify_all();
  std::unique_lock l(done_mu);
  done_cv.wait(l, [&] { return done; });
  if (error) std::rethrow_exception(error);
}

namespace {
void check_slot(int id, size_t slots) {
  if (id < 0 || size_t(id) >= slots)
    fail_field("slots", "id", "in [0, " + std::to_string(slots) + ")", std::to_string(id));
}
}  // namespace

Scheduler::SlotCache Scheduler::save_slot(int id) {
  check_slot(id, seqs_.size());
  SlotCache out;
  on_loop([&] {
    const SlotCache& k = seqs_[size_t(id)]->kept;
    if (k.tokens.empty()) fail_field("slots", "slot " + std::to_string(id), "a finished request's cache", "none kept");
    out.tokens = k.tokens;
    out.cache = k.cache.copy();
  });
  return out;
}

int Scheduler::restore_slot(int id, SlotCache c) {
  check_slot(id, seqs_.size());
  EMBER_CHECK(c.cache.n_pos == int(c.tokens.size()));
  const int n = c.cache.n_pos;
  on_loop([&] {
    ram_.insert(c.tokens, c.cache);
    seqs_[size_t(id)]->kept = std::move(c);
  });
  return n;
}

int Scheduler::erase_slot(int id) {
  check_slot(id, seqs_.size());
  int n = 0;
  on_loop([&] {
    SlotCache& k = seqs_[size_t(id)]->kept;
    n = int(k.tokens.size());
    k = SlotCache{};
  });
  return n;
}

}  // namespace ember::serve
