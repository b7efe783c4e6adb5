#pragma once
// A fixed pool of worker threads with a static-partition parallel_for and a dynamic one,
// parallel_chunks. Determinism does not depend on the pool: every kernel gives each output
// element to exactly one task and fixes its reduction order by shape alone, so the partition
// only changes who computes, not what.
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

  // Calls fn(begin, end) on the chunks [0, chunk), [chunk, 2 chunk), ... of [0, n), each
  // taken by whichever thread is free next, and returns when all are done. For long sections
  // whose threads may not run at the same speed: on a shared VM one vCPU loses time to its
  // neighbours, and on a hybrid CPU an efficiency core is slower than a performance core; a
  // static split then waits for the slowest thread (an Emerald Rapids VM, Qwen2.5-0.5B pp512,
  // 2 threads: one of them idle in 9-21 % of the time, the other in a matmul). Chunks only
  // balance threads: a pool of one thread, or a range of one chunk, is one call fn(0, n), as
  // in parallel_for (a matmul's call has a start-up worth saving). fn must not throw.
  void parallel_chunks(int64_t n, int64_t chunk, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker(int index);
  void run(int64_t n, int64_t chunk, const std::function<void(int64_t, int64_t)>& fn);
  void run_share(int index);
  int n_threads_;
  int spin_iterations_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_start_, cv_done_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_chunk_ = 0;                // 0: one static share per thread
  std::atomic<int64_t> next_chunk_{0};   // parallel_chunks: the next chunk to hand out
  std::atomic<uint64_t> generation_{0};  // written under mu_; read by spinning workers
  std::atomic<int> pending_{0};          // workers still running the current job
  std::atomic<bool> stop_{false};
};

}  // namespace ember
