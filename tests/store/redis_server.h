#pragma once
// A real redis-server (/usr/bin/redis-server) for the store tests: started on a free loopback
// port in a temporary directory, waited for with a bounded PING loop, stopped (SIGTERM, then
// SIGKILL after 5 s) when the object goes. Nothing is mocked.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "support/test_support.h"

namespace ember::test {

inline constexpr const char* kRedisServer = "/usr/bin/redis-server";

// A TCP socket listening on a free loopback port (*port), for the tests' scripted servers.
inline int listen_on_loopback(int* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t n = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
  *port = ntohs(a.sin_port);
  ::listen(fd, 4);
  return fd;
}

// A port nothing listens on now (bound to 0, read, released).
inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t n = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
  ::close(fd);
  return ntohs(a.sin_port);
}

// A port P below 55535 with P and P + 10000 (a cluster node's bus port) both free now.
inline bool port_free(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(uint16_t(port));
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}
inline int free_cluster_port() {
  for (int i = 0; i < 1000; ++i) {
    const int p = 20000 + (free_port() * 7919 + i * 104729) % 30000;
    if (port_free(p) && port_free(p + 10000)) return p;
  }
  return 0;
}

// One PING over a fresh TCP connection; true on "+PONG" (or a NOAUTH error: it is up).
inline bool redis_answers(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(uint16_t(port));
  timeval tv{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  bool ok = false;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::write(fd, "PING\r\n", 6) == 6) {
    char buf[64] = {};
    const ssize_t r = ::read(fd, buf, sizeof buf - 1);
    ok = r > 0 && (std::string(buf).rfind("+PONG", 0) == 0 || std::string(buf).rfind("-NOAUTH", 0) == 0);
  }
  ::close(fd);
  return ok;
}

class RedisServer {
 public:
  // extra: more redis-server arguments ("--appendonly", "yes", ...). dir: its working directory.
  RedisServer(const std::string& dir, std::vector<std::string> extra = {}, int port = 0)
      : dir_(dir), extra_(std::move(extra)), port_(port ? port : free_port()) {
    start();
  }
  ~RedisServer() { stop(); }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return port_; }
  std::string uri() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  pid_t pid() const { return pid_; }

  void start() {
    std::vector<std::string> args = {kRedisServer, "--port", std::to_string(port_), "--bind", "127.0.0.1",
                                     "--dir", dir_, "--save", "", "--appendonly", "no", "--daemonize", "no",
                                     "--logfile", dir_ + "/redis.log", "--protected-mode", "no"};
    args.insert(args.end(), extra_.begin(), extra_.end());
    pid_ = ::fork();
    if (pid_ == 0) {
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(kRedisServer, argv.data());
      ::_exit(127);
    }
    ASSERT_GT(pid_, 0);
    // Bounded: 20 s (the shared test machine can be slow to schedule a new process).
    for (int i = 0; i < 400 && !redis_answers(port_); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!redis_answers(port_)) {
      std::string log;
      run_command("tail -5 " + dir_ + "/redis.log", &log);
      FAIL() << "redis-server did not answer on port " << port_ << " within 20 s; its log: " << log;
    }
  }

  // kill -9: no shutdown, no save (what a crash does).
  void kill9() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 100; ++i) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    kill9();
  }

 private:
  std::string dir_;
  std::vector<std::string> extra_;
  int port_;
  pid_t pid_ = -1;
};

// redis-cli against a port, its output.
inline std::string redis_cli(int port, const std::string& args) {
  std::string out;
  run_command("/usr/bin/redis-cli -p " + std::to_string(port) + " " + args, &out);
  return out;
}

}  // namespace ember::test
