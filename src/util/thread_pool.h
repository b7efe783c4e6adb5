#pragma once
// A fixed pool of worker threads with a static-partition parallel_for. Determinism does not
// depend on the pool: every kernel gives each output element to exactly one task and fixes
// its reduction order by shape alone, so the partition only changes who computes, not what.
//
// Waiting spins briefly before it sleeps: one decode step runs hundreds of parallel sections
// of tens of microseconds each, and waking a sleeping thread through the kernel costs about
// as much as one of them (bench_engine, 2 threads). A pool with more threads than the cores
// this process may run on never spins: a spinning thread would then hold a core that a
// thread with work needs (1000 threads on 4 cores: 8 tokens took > 30 s instead of 0.26 s).
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ember {

// The cores this process may run on (its sched_getaffinity set; hardware_concurrency() where
// that is unavailable), at least 1.
int cores_available();

class ThreadPool {
 public:
  // n_threads >= 1; the calling thread is one of them.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  int size() const { return n_threads_; }
  // Whether waits spin before sleeping (false when the pool has more threads than cores).
  bool spins() const { return spin_iterations_ > 0; }

  // Calls fn(begin, end) on contiguous chunks covering [0, n), one chunk per thread, and
  // returns when all are done. fn must not throw.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker(int index);
  int n_threads_;
  int spin_iterations_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_start_, cv_done_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  std::atomic<uint64_t> generation_{0};  // written under mu_; read by spinning workers
  std::atomic<int> pending_{0};          // workers still running the current job
  std::atomic<bool> stop_{false};
};

}  // namespace ember
