#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cmath>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support/test_support.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/f16.h"
#include "util/mapped_file.h"
#include "util/open_file.h"
#include "util/sha256.h"
#include "util/thread_pool.h"

namespace ember {
namespace {

using test::error_of;

TEST(F16, RoundTripsEveryHalfExactly) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = f16_to_f32(uint16_t(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f))));
      continue;
    }
    EXPECT_EQ(f32_to_f16(f), h) << "half bits " << h;
  }
}

TEST(F16, RoundsToNearestEven) {
  EXPECT_EQ(f32_to_f16(1.0f + 1.0f / 2048), 0x3c00);          // tie -> even (down)
  EXPECT_EQ(f32_to_f16(1.0f + 3.0f / 2048), 0x3c02);          // tie -> even (up)
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);                    // rounds to infinity
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);       // tie to even zero
  EXPECT_EQ(f32_to_f16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
}

TEST(BF16, RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x3f808000)), 0x3f80);  // tie, even stays
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x3f818000)), 0x3f82);  // tie, odd rounds up
}

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(AtomicFile, RefusesOverwriteWithoutForce) {
  const std::string dir = test::temp_dir("atomic");
  const std::string path = dir + "/out.txt";
  write_file_atomic(path, "first", false);
  EXPECT_THROW(write_file_atomic(path, "second", false), Error);
  EXPECT_EQ(read_file(path), "first");
  write_file_atomic(path, "second", true);
  EXPECT_EQ(read_file(path), "second");
}

TEST(AtomicFile, UncommittedLeavesNothing) {
  const std::string dir = test::temp_dir("atomic");
  {
    AtomicFile f(dir + "/x", false);
    f.sink().write("partial");
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir));
}

TEST(AtomicDirectory, CommitsWholeOrNothing) {
  const std::string dir = test::temp_dir("atomicdir");
  {
    AtomicDirectory d(dir + "/snap", DirectoryKind::fixed("a test directory", {"a.bin"}), false);
    auto f = d.create("a.bin");
    f->sink().write("x");
    f->commit();
  }
  EXPECT_FALSE(path_exists(dir + "/snap"));
  AtomicDirectory d(dir + "/snap", DirectoryKind::fixed("a test directory", {"a.bin"}), false);
  auto f = d.create("a.bin");
  f->sink().write("x");
  f->commit();
  EXPECT_THROW(d.create("../escape"), Error);
  d.commit();
  EXPECT_EQ(read_file(dir + "/snap/a.bin"), "x");
  EXPECT_THROW(AtomicDirectory(dir + "/snap", DirectoryKind::fixed("a test directory", {"a.bin"}), false), Error);
}

// The message of the Error that fn() throws ("" when it throws none).
// read_file() and MappedFile::open() open through open_regular_file(): the same refusals.
TEST(OpenRegularFile, ReadFileAndMappedFileRefuseTheSamePaths) {
  const std::string dir = test::temp_dir("open");
  write_file_atomic(dir + "/five", "12345", false);
  uint64_t size = 0;
  const int fd = open_regular_file(dir + "/five", &size);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(::close(fd), 0);
  EXPECT_EQ(size, 5u);
  EXPECT_EQ(read_file(dir + "/five"), "12345");
  EXPECT_EQ(MappedFile::open(dir + "/five")->size(), 5u);
  for (const std::string& path : {dir + "/missing", dir}) {
    SCOPED_TRACE(path);
    const std::string msg = error_of([&] { open_regular_file(path, &size); });
    EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << msg;
    EXPECT_NE(msg.find(path == dir ? "not a regular file" : "cannot open: "), std::string::npos) << msg;
    EXPECT_EQ(error_of([&] { read_file(path); }), msg);
    EXPECT_EQ(error_of([&] { MappedFile::open(path); }), msg);
  }
  // read_file's own limit comes after the shared checks.
  EXPECT_NE(error_of([&] { read_file(dir + "/five", 4); }).find("at most 4 bytes"), std::string::npos);
}

// Issue 12, defect 2: a FIFO as an input hung every reader forever (open(2) blocks until a
// writer appears). Each entry point must refuse it at once, naming it. The test runs the opens
// on a thread and fails (instead of hanging CI) if they have not returned within 10 s.
TEST(OpenRegularFile, RefusesFifoWithoutBlocking) {
  const std::string dir = test::temp_dir("fifo");
  const std::string fifo = dir + "/input.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::vector<std::string> messages;
  std::atomic<bool> done{false};
  std::thread t([&] {
    uint64_t size = 0;
    messages.push_back(error_of([&] { open_regular_file(fifo, &size); }));
    messages.push_back(error_of([&] { read_file(fifo); }));
    messages.push_back(error_of([&] { MappedFile::open(fifo); }));
    messages.push_back(error_of([&] { sha256_file_hex(fifo); }));
    done = true;
  });
  for (int i = 0; i < 1000 && !done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (!done) {
    // Unblock the reader (a writer end appears, then closes) so the process can end, then fail.
    for (int i = 0; i < 8 && !done; ++i) {
      const int w = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
      if (w >= 0) ::close(w);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    t.detach();
    FAIL() << "an open of a FIFO blocked";
  }
  t.join();
  for (const std::string& msg : messages) {
    EXPECT_EQ(msg, fifo + ": not a regular file (a FIFO)");
  }
}

TEST(OpenRegularFile, RefusesASymlinkWhenAskedNotToFollow) {
  const std::string dir = test::temp_dir("nofollow");
  write_file_atomic(dir + "/real", "x", false);
  ASSERT_EQ(::symlink((dir + "/real").c_str(), (dir + "/link").c_str()), 0);
  uint64_t size = 0;
  const int fd = open_regular_file(dir + "/link", &size);  // followed by default
  EXPECT_EQ(::close(fd), 0);
  EXPECT_EQ(error_of([&] { open_regular_file(dir + "/link", &size, /*follow_symlinks=*/false); }),
            dir + "/link: is a symbolic link; expected a regular file");
}

TEST(ThreadPool, CoversRangeOnce) {
  ThreadPool pool(3);
  std::vector<int> hits(1000, 0);
  pool.parallel_for(1000, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[size_t(i)]++;
  });
  for (int h : hits) EXPECT_EQ(h, 1);
}

// parallel_chunks hands out [0, n) in chunks of the given size (the last shorter), each
// exactly once, on any pool size, and in alternation with parallel_for on the same pool; a
// pool of one thread, or a range within one chunk, makes the one call fn(0, n).
TEST(ThreadPool, ChunksCoverRangeOnceInChunksOfTheirSize) {
  for (const int threads : {1, 2, 3, 5})
    for (const int64_t n : {int64_t(0), int64_t(1), int64_t(7), int64_t(64), int64_t(1001)})
      for (const int64_t chunk : {int64_t(1), int64_t(3), int64_t(64), int64_t(5000)}) {
        ThreadPool pool(threads);
        std::vector<int> hits(size_t(n), 0);
        std::mutex mu;
        std::vector<std::pair<int64_t, int64_t>> calls;
        pool.parallel_chunks(n, chunk, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[size_t(i)]++;
          std::lock_guard<std::mutex> lock(mu);
          calls.emplace_back(b, e);
        });
        for (int h : hits) ASSERT_EQ(h, 1) << threads << " threads, n " << n << ", chunk " << chunk;
        if (n > 0 && (threads == 1 || chunk >= n)) {
          ASSERT_EQ(calls.size(), 1u);
          EXPECT_EQ(calls[0], std::make_pair(int64_t(0), n));
        } else {
          for (const auto& [b, e] : calls) {
            ASSERT_EQ(b % chunk, 0);
            ASSERT_EQ(e, std::min(n, b + chunk)) << "a chunk is [b, b + chunk) or ends at n";
          }
        }
        std::vector<int> again(size_t(n), 0);
        pool.parallel_for(n, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) again[size_t(i)]++;
        });
        for (int h : again) ASSERT_EQ(h, 1);
      }
}

// The point of parallel_chunks: a thread that is held up (here, the one that takes chunk 0
// and waits there until every other chunk is done) does not hold back the rest of the range,
// which the other thread takes. A static split would leave the held thread its whole half:
// the wait would run into its 20-second limit.
TEST(ThreadPool, ChunksGoToTheThreadThatIsFree) {
  ThreadPool pool(2);
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  bool waited_out = false;
  pool.parallel_chunks(40, 1, [&](int64_t b, int64_t) {
    std::unique_lock<std::mutex> lock(mu);
    if (b == 0) {
      waited_out = !cv.wait_for(lock, std::chrono::seconds(20), [&] { return done == 39; });
      return;
    }
    if (++done == 39) cv.notify_all();
  });
  EXPECT_FALSE(waited_out) << "chunks 1-39 waited for the thread held in chunk 0";
  EXPECT_EQ(done, 39);
}

// Issue 12, defect 3: 1000 threads on 4 cores spun idle against the threads with work (8
// tokens: > 30 s instead of 0.26 s). An oversubscribed pool sleeps instead of spinning, and
// still covers its range exactly once.
TEST(ThreadPool, OversubscribedPoolDoesNotSpin) {
  const int cores = cores_available();
  ASSERT_GE(cores, 1);
  EXPECT_TRUE(ThreadPool(cores).spins());
  ThreadPool pool(cores + 3);
  EXPECT_FALSE(pool.spins());
  for (int round = 0; round < 50; ++round) {
    std::vector<int> hits(257, 0);
    pool.parallel_for(257, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[size_t(i)]++;
    });
    for (int h : hits) ASSERT_EQ(h, 1);
  }
}

}  // namespace
}  // namespace ember
