// The store under load: C concurrent clients, each doing OPS mixed operations (a put of a
// fresh state of MIN..MAX MB, then a verified get of it, then its removal), against a real
// redis-server this benchmark starts on a free loopback port, and against a dir: store.
// Every get is compared byte for byte with what was put: lost or corrupted reads are counted.
// Reported as ratios: ember's payload bytes/s over Redis to redis-benchmark's SET/GET bytes/s
// at the chunk size ember sends (1 MiB values, the same client count), and dir: to Redis.
//
//   bench_store [clients=8] [ops=200] [min_mb=1] [max_mb=25] [dir=/tmp]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kv/state.h"
#include "store/store.h"
#include "util/error.h"
#include "util/sha256.h"

using namespace ember;
using Clock = std::chrono::steady_clock;

namespace {

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t n = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
  ::close(fd);
  return ntohs(a.sin_port);
}

// A state of about `mb` MiB (8 layers x 8 KV heads x 64 dims: 16 KiB per position), unsealed.
kv::KvState make_state(int mb, uint32_t seed) {
  kv::KvState s;
  kv::SnapshotManifest& m = s.manifest;
  m.producer = "bench_store";
  m.model.identity = sha256_hex("bench-model");
  m.model.architecture = "qwen2";
  m.model.vocab_size = 1024;
  m.model.embedding_size = 1024;
  m.model.query_heads = 16;
  m.tokenizer.identity = sha256_hex("bench-tokenizer");
  const int P = 64 * mb;
  m.geometry = {8, 8, 64, P};
  m.rope.layout = "neox";
  m.rope.theta = 1000000.0f;
  m.attention.qk_norm = kv::kQkNormNone;
  m.numerics.contract = "canonical-v1";
  m.numerics.engine_fingerprint = "canonical-v1;bench";
  std::mt19937 rng(seed);
  for (int i = 0; i < P; ++i) m.prefix.tokens.push_back(int32_t(rng() % 1024));
  m.resume.token = 0;
  m.resume.position = P;
  s.cache = model::KvCache(8, 8, 64, P);
  s.cache.n_pos = P;
  for (auto& x : s.cache.k) x = uint16_t(rng() & 0x3bff);  // finite f16
  for (auto& x : s.cache.v) x = uint16_t(rng() & 0x3bff);
  return s;
}

struct Result {
  double seconds = 0;
  uint64_t bytes = 0;
  int bad = 0, errors = 0;
};

Result load(const std::string& uri, int clients, int ops, int min_mb, int max_mb) {
  std::vector<kv::KvState> states;
  std::mt19937 rng(15);
  for (int c = 0; c < clients; ++c) states.push_back(make_state(min_mb + int(rng() % uint32_t(max_mb - min_mb + 1)), uint32_t(c)));
  std::atomic<uint64_t> bytes{0};
  std::atomic<int> bad{0}, errors{0};
  const auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&, c] {
      try {
        store::Store st = store::Store::open(uri);
        kv::KvState& s = states[size_t(c)];
        for (int i = 0; i < ops / 2; ++i) {
          s.manifest.resume.token = int32_t(i % 1024);  // a fresh state: another seal, same payloads
          kv::VerifiedState v = kv::seal(std::move(s), "bench");
          const store::PutResult r = st.put(v, {});
          const kv::VerifiedState g = st.get(r.seal, false);
          if (g.cache().k != v.cache().k || g.cache().v != v.cache().v) ++bad;
          bytes += 4 * v.manifest().payload_bytes();  // keys + values, put and get
          st.remove(r.seal);
          s = std::move(v).release();  // the next op edits and seals it again
        }
      } catch (const Error& e) {
        std::fprintf(stderr, "bench_store: %s\n", e.what());
        ++errors;
      }
    });
  for (auto& t : threads) t.join();
  Result r;
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.bytes = bytes;
  r.bad = bad;
  r.errors = errors;
  return r;
}

// redis-benchmark SET and GET of 1 MiB values with `clients` connections: bytes/s of each.
std::pair<double, double> redis_benchmark(int port, int clients, int n) {
  const std::string cmd = "/usr/bin/redis-benchmark -p " + std::to_string(port) + " -t set,get -n " +
                          std::to_string(n) + " -c " + std::to_string(clients) + " -d 1048576 --csv 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  double set = 0, get = 0;
  char line[512];
  while (p && std::fgets(line, sizeof line, p)) {
    double rps = 0;
    if (std::sscanf(line, "\"SET\",\"%lf\"", &rps) == 1) set = rps * 1048576.0;
    if (std::sscanf(line, "\"GET\",\"%lf\"", &rps) == 1) get = rps * 1048576.0;
  }
  if (p) ::pclose(p);
  return {set, get};
}

}  // namespace

int main(int argc, char** argv) {
  const int clients = argc > 1 ? std::atoi(argv[1]) : 8;
  const int ops = argc > 2 ? std::atoi(argv[2]) : 200;
  const int min_mb = argc > 3 ? std::atoi(argv[3]) : 1;
  const int max_mb = argc > 4 ? std::atoi(argv[4]) : 25;
  const std::string base = argc > 5 ? argv[5] : "/tmp";
  if (clients < 1 || ops < 2 || min_mb < 1 || max_mb < min_mb) {
    std::fprintf(stderr, "usage: bench_store [clients>=1] [ops>=2] [min_mb>=1] [max_mb>=min_mb] [dir]\n");
    return 2;
  }
  char tmpl[4096];
  std::snprintf(tmpl, sizeof tmpl, "%s/bench-store-XXXXXX", base.c_str());
  if (!::mkdtemp(tmpl)) return 2;
  const std::string dir = tmpl;
  const int port = free_port();
  const pid_t pid = ::fork();
  if (pid == 0) {
    const std::string ps = std::to_string(port);
    ::execl("/usr/bin/redis-server", "redis-server", "--port", ps.c_str(), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", dir.c_str(), "--logfile", (dir + "/redis.log").c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  bool up = false;
  for (int i = 0; i < 200 && !up; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    try {
      store::open_backend("redis://127.0.0.1:" + std::to_string(port));
      up = true;
    } catch (const Error&) {
    }
  }
  if (!up) {
    std::fprintf(stderr, "bench_store: redis-server did not start\n");
    ::kill(pid, SIGKILL);
    return 1;
  }
  std::printf("bench_store: %d clients x %d ops (put + verified get, then rm), states of %d..%d MiB\n", clients, ops,
              min_mb, max_mb);
  const Result rr = load("redis://127.0.0.1:" + std::to_string(port), clients, ops, min_mb, max_mb);
  const Result rd = load("dir:" + dir + "/store", clients, ops, min_mb, max_mb);
  const auto [set_bps, get_bps] = redis_benchmark(port, clients, std::max(64, clients * 16));
  ::kill(pid, SIGTERM);
  ::waitpid(pid, nullptr, 0);
  std::system(("rm -rf '" + dir + "'").c_str());
  const double redis_bps = double(rr.bytes) / rr.seconds, dir_bps = double(rd.bytes) / rd.seconds;
  const double bench_bps = (set_bps + get_bps) / 2;
  std::printf("redis: %.1f s, %.1f MiB/s, %d corrupted or lost reads, %d client errors\n", rr.seconds,
              redis_bps / 1048576, rr.bad, rr.errors);
  std::printf("dir:   %.1f s, %.1f MiB/s, %d corrupted or lost reads, %d client errors\n", rd.seconds,
              dir_bps / 1048576, rd.bad, rd.errors);
  std::printf("redis-benchmark 1 MiB values, %d clients: SET %.1f MiB/s, GET %.1f MiB/s\n", clients,
              set_bps / 1048576, get_bps / 1048576);
  if (bench_bps > 0) std::printf("ratio ember-on-redis / redis-benchmark (mean of SET, GET): %.2f\n", redis_bps / bench_bps);
  std::printf("ratio ember-on-dir / ember-on-redis: %.2f\n", dir_bps / redis_bps);
  return rr.bad + rd.bad + rr.errors + rd.errors > 0 ? 1 : 0;
}
