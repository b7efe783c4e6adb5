#include "util/thread_pool.h"

#include <sched.h>

#include "util/error.h"

namespace ember {

namespace {
// About 50-100 microseconds of polling: longer than the gaps between the parallel sections of
// a decode step, short enough not to matter when a pool sits idle.
constexpr int kSpinIterations = 4000;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}
}  // namespace

int cores_available() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? int(hw) : 1;
}

ThreadPool::ThreadPool(int n_threads)
    : n_threads_(n_threads < 1 ? 1 : n_threads),
      spin_iterations_(n_threads_ <= cores_available() ? kSpinIterations : 0) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_start_.notify_all();
  for (auto& t : workers_) t.join();
}

// This thread's part of the current job: its static share, or chunks until none is left.
void ThreadPool::run_share(int index) {
  const std::function<void(int64_t, int64_t)>& fn = *job_;
  const int64_t n = job_n_, chunk = job_chunk_;
  if (chunk == 0) {
    const int64_t begin = n * index / n_threads_;
    const int64_t end = n * (index + 1) / n_threads_;
    if (begin < end) fn(begin, end);
    return;
  }
  for (;;) {
    const int64_t c = next_chunk_.fetch_add(1, std::memory_order_relaxed);
    if (c >= (n + chunk - 1) / chunk) return;
    fn(c * chunk, c * chunk + chunk < n ? c * chunk + chunk : n);
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  run(n, 0, fn);
}

void ThreadPool::parallel_chunks(int64_t n, int64_t chunk,
                                 const std::function<void(int64_t, int64_t)>& fn) {
  EMBER_CHECK(chunk >= 1);
  run(n, chunk, fn);
}

void ThreadPool::run(int64_t n, int64_t chunk, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (n_threads_ == 1 || n == 1 || (chunk > 0 && chunk >= n)) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    job_n_ = n;
    job_chunk_ = chunk;
    next_chunk_.store(0, std::memory_order_relaxed);
    pending_.store(n_threads_ - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  cv_start_.notify_all();
  run_share(0);
  for (int i = 0; i < spin_iterations_ && pending_.load(std::memory_order_acquire) != 0; ++i)
    cpu_relax();
  if (pending_.load(std::memory_order_acquire) != 0) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_done_.wait(lock, [this] { return pending_.load(std::memory_order_acquire) == 0; });
  }
  std::lock_guard<std::mutex> lock(mu_);
  job_ = nullptr;
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    for (int i = 0; i < spin_iterations_ && !stop_.load(std::memory_order_relaxed) &&
                    generation_.load(std::memory_order_acquire) == seen;
         ++i)
      cpu_relax();
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_start_.wait(lock, [&] { return stop_ || generation_.load() != seen; });
      if (stop_) return;
      seen = generation_.load();
    }
    // job_, job_n_ and job_chunk_ stay as they are until this worker's pending_ decrement:
    // the caller waits for it before it clears or replaces them.
    run_share(index);
    // The last worker to finish wakes the caller if it went to sleep; under mu_, so the
    // caller cannot check pending_ and then miss this notification.
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mu_);
      cv_done_.notify_one();
    }
  }
}

}  // namespace ember
