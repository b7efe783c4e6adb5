// Faults against real processes: kill -9 of `ember store put` at random points (the store
// holds the whole state or none of it; what is left, verify names and gc removes), kill -9 of
// redis-server during a put with AOF (no partial entry after the restart), a hostile server's
// reply sizes refused from their headers, and the password read from the environment or a
// file, never argv.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <atomic>
#include <cstring>
#include <chrono>
#include <fstream>
#include <random>
#include <thread>

#include "kv/kv_test_util.h"
#include "store/redis_server.h"
#include "store/store.h"
#include "support/cli_run.h"
#include "support/test_support.h"

namespace ember::store {
namespace {

using Clock = std::chrono::steady_clock;
using test::error_of;
using test::q;

// `ember store put URI DIR --chunk-bytes 4096` as a child process (stdout/stderr to /dev/null).
pid_t spawn_put(const std::string& uri, const std::string& dir) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::dup2(null, 2);
    const std::string bin = test::ember_binary();
    ::execl(bin.c_str(), bin.c_str(), "store", "put", uri.c_str(), dir.c_str(), "--chunk-bytes", "4096",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

int wait_exit(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

// The store holds the whole state or none of it; whatever a dead put left is named by verify
// as orphan chunks or a stale marker (never a bad entry) and removed by gc.
void check_all_or_nothing(const std::string& uri, const kv::VerifiedState& s, int trial, bool* complete) {
  Store st = Store::open(uri);
  const std::string seal = s.manifest().seal;
  *complete = st.backend().exists(KeyLayout::entry(seal));
  if (*complete) {
    const kv::VerifiedState g = st.get(seal, false);
    EXPECT_EQ(g.cache().k, s.cache().k) << "trial " << trial;
    EXPECT_EQ(g.cache().v, s.cache().v) << "trial " << trial;
  }
  // stale-temporary: a dir: put killed inside a chunk's atomic write (its temporary file).
  for (const VerifyFinding& f : st.verify().findings)
    EXPECT_TRUE(f.what == "orphan-chunks" || f.what == "stale-pending" || f.what == "stale-temporary")
        << "trial " << trial << ": " << f.what << " " << f.detail;
  GcOptions g;
  g.grace_s = 0;  // the put is dead
  st.gc(g);
  EXPECT_TRUE(st.verify().ok()) << "trial " << trial;
  if (*complete) st.remove(seal);  // the next trial starts empty
  const StoreStats t = st.stats();
  EXPECT_EQ(t.entries + t.chunks + t.names + t.prefix_keys, 0u) << "trial " << trial;
}

// positions: 256 gives 2 x 512 KiB (256 chunks of 4 KiB); the dir: store fsyncs each chunk.
void kill_loop(const std::string& uri, int trials, int positions) {
  const std::string dir = test::temp_dir("store-kill");
  kv::VerifiedState s = test::make_snapshot(4, 4, 64, positions);
  kv::write_state_dir(s, dir + "/snap", false);
  const auto t0 = Clock::now();
  ASSERT_EQ(wait_exit(spawn_put(uri, dir + "/snap")), 0);
  const double full_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  bool complete = false;
  check_all_or_nothing(uri, s, -1, &complete);
  ASSERT_TRUE(complete);
  std::mt19937 rng(15);
  int killed_midway = 0, done = 0;
  for (int i = 0; i < trials; ++i) {
    const pid_t pid = spawn_put(uri, dir + "/snap");
    std::this_thread::sleep_for(std::chrono::microseconds(int64_t(full_us * (rng() % 1000) / 1000.0)));
    ::kill(pid, SIGKILL);
    wait_exit(pid);
    check_all_or_nothing(uri, s, i, &complete);
    (complete ? done : killed_midway)++;
  }
  std::printf("[ kill -9 ] %d trials: %d left nothing, %d complete (full put %.0f ms)\n", trials, killed_midway, done,
              full_us / 1000);
}

TEST(StoreFaults, KillDuringPutLeavesAllOrNothingOnRedis) {
  const std::string dir = test::temp_dir("store-redis");
  test::RedisServer server(dir);
  kill_loop(server.uri(), 20, 256);
}

TEST(StoreFaults, KillDuringPutLeavesAllOrNothingOnDir) {
  const std::string dir = test::temp_dir("store-dir");
  kill_loop("dir:" + dir + "/s", 10, 32);  // 32 chunks
}

TEST(StoreFaults, RedisKilledDuringAPutAndRestartedWithAofShowsNoPartialEntry) {
  const std::string dir = test::temp_dir("store-aof");
  const std::vector<std::string> aof = {"--appendonly", "yes", "--appendfsync", "always"};
  auto server = std::make_unique<test::RedisServer>(dir, aof);
  const int port = server->port();
  kv::VerifiedState s = test::make_snapshot(4, 4, 64, 256);
  kv::write_state_dir(s, dir + "/snap", false);
  const std::string seal = s.manifest().seal;
  std::mt19937 rng(7);
  for (int trial = 0; trial < 3; ++trial) {
    const pid_t pid = spawn_put(server->uri(), dir + "/snap");
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + rng() % 40));
    server->kill9();
    const int status = wait_exit(pid);
    server = std::make_unique<test::RedisServer>(dir, aof, port);
    Store st = Store::open(server->uri());
    const bool entry = st.backend().exists(KeyLayout::entry(seal));
    std::printf("[ aof ] trial %d: put %s, entry %s after restart\n", trial,
                WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "finished" : "died", entry ? "present" : "absent");
    if (entry) {
      EXPECT_EQ(st.get(seal, false).cache().k, s.cache().k);
    }
    for (const VerifyFinding& f : st.verify().findings)
      EXPECT_TRUE(f.what == "orphan-chunks" || f.what == "stale-pending") << f.what << " " << f.detail;
    GcOptions g;
    g.grace_s = 0;
    st.gc(g);
    if (entry) st.remove(seal);
    EXPECT_TRUE(st.verify().ok());
  }
}

// A server that answers every GET with a 10^14-byte bulk header and every SCAN with a
// 2-billion-element array header (DBSIZE, which bounds the SCAN calls, with 1), then waits.
class HostileServer {
 public:
  HostileServer() {
    fd_ = test::listen_on_loopback(&port_);
    thread_ = std::thread([this] {
      while (!stop_) {
        const int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        char buf[4096];
        ssize_t r;
        while ((r = ::recv(c, buf, sizeof buf, 0)) > 0) {
          const std::string in(buf, size_t(r));
          const char* reply = in.find("DBSIZE") != std::string::npos ? ":1\r\n"
                              : in.find("SCAN") != std::string::npos ? "*2000000000\r\n"
                                                                     : "$99999999999999\r\n";
          if (::send(c, reply, std::strlen(reply), MSG_NOSIGNAL) < 0) break;
        }
        ::close(c);
      }
    });
  }
  ~HostileServer() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  int port() const { return port_; }

 private:
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST(StoreFaults, AHostileServersReplySizesAreRefusedFromTheirHeaders) {
  HostileServer h;
  const std::string uri = "redis://127.0.0.1:" + std::to_string(h.port());
  const std::string seal(64, 'a');
  std::string err = error_of([&] { Store::open(uri).read_entry(seal); });
  EXPECT_NE(err.find("expected a value of at most 268435456 bytes, found 99999999999999 bytes"), std::string::npos)
      << err;
  err = error_of([&] { Store::open(uri).catalog(); });
  EXPECT_NE(err.find("expected an array of at most 1048576 elements, found 2000000000 elements"), std::string::npos)
      << err;
}

TEST(StoreFaults, ThePasswordComesFromTheEnvironmentOrAFile) {
  const std::string dir = test::temp_dir("store-auth");
  test::RedisServer server(dir, {"--requirepass", "s3cret-pw"});
  const std::string uri = server.uri();
  test::CliRun r = test::run_ember("store stats " + uri);
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("EMBER_REDIS_PASSWORD or --password-file"), std::string::npos) << r.out;
  r.rc = test::run_command("EMBER_REDIS_PASSWORD=s3cret-pw " + test::ember_binary() + " store stats " + uri, &r.out);
  EXPECT_EQ(r.rc, 0) << r.out;
  std::ofstream(dir + "/pw") << "s3cret-pw\n";
  r = test::run_ember("store stats " + uri + " --password-file " + q(dir + "/pw"));
  EXPECT_EQ(r.rc, 0) << r.out;
  std::ofstream(dir + "/bad") << "wrong\n";
  r = test::run_ember("store stats " + uri + " --password-file " + q(dir + "/bad"));
  EXPECT_NE(r.rc, 0);
  EXPECT_EQ(r.out.find("wrong"), std::string::npos) << r.out;  // the password is never printed
}

}  // namespace
}  // namespace ember::store
