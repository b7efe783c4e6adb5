#pragma once
// The key-value layer under ember's shared KV store (store/store.h): a handful of operations
// that both an embedded directory and a Redis server (single node or Redis Cluster) do
// atomically, so that store.cpp holds the layout and every check once.
//
//   dir:PATH                      keys are files under PATH (':' separates directories),
//                                 each written by util/atomic_file.h (temporary, fsync,
//                                 renameat2(RENAME_NOREPLACE)); no server
//   redis://[user@]host:port[/db] one Redis or Valkey server, through hiredis
//   redis+cluster://host:port[,host:port...]
//                                 Redis Cluster seed nodes: a key goes to the node owning its
//                                 hash slot (the part in {braces}); MOVED and ASK are followed
//
// Keys are ASCII: components of [A-Za-z0-9._{}-] separated by ':' (store.cpp builds them).
// Every value read is bounded by the caller's max_bytes before it is allocated, so a hostile
// server (or a hostile file) cannot make ember allocate more than it asked for.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ember::store {

struct BackendOptions {
  // The Redis password (AUTH). Never part of the URI or argv: the CLI reads it from
  // EMBER_REDIS_PASSWORD or --password-file and passes it here.
  std::string password;
  int timeout_ms = 5000;  // connect, each read and each write (Redis)
  // The whole of one reply (and of one command's send) must arrive within this, plus 1 s per
  // MiB it has carried so far (Redis): a server that drips a byte at a time is given up on
  // after about this long, while the largest reply ember accepts (256 MiB) still has room at
  // 1 MiB/s. Each read still has timeout_ms.
  int reply_deadline_ms = 10000;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // The URI as given (no password ever appears in it): names the store in errors.
  virtual const std::string& uri() const = 0;
  // The value of `key`, or nullopt when absent. Error naming the key when the value is longer
  // than max_bytes (nothing longer is read into memory).
  virtual std::optional<std::string> get(const std::string& key, size_t max_bytes) = 0;
  // Creates `key` with `value` unless it exists (atomically: of two concurrent creators
  // exactly one succeeds). True when this call created it.
  virtual bool create(const std::string& key, std::string_view value) = 0;
  // Sets `key` to `value`, replacing any old value in one step (a reader sees old or new).
  virtual void replace(const std::string& key, std::string_view value) = 0;
  virtual bool exists(const std::string& key) = 0;
  // Removes `key` (no error when absent).
  virtual void remove(const std::string& key) = 0;
  // Removes `keys` (all in `guard`'s hash tag) only while `guard` does not exist, in one step
  // against create(guard): a concurrent creator of `guard` either made it before the check
  // (nothing is removed, false) or makes it after the keys are gone. Redis: WATCH, EXISTS,
  // MULTI/DEL/EXEC; dir: the store's lock file, held exclusively here and shared by create().
  virtual bool remove_unless_exists(const std::string& guard, const std::vector<std::string>& keys) = 0;
  // Every key matching `pattern`: ':'-separated components where "*" matches exactly one
  // whole component. Order unspecified.
  virtual std::vector<std::string> scan(const std::string& pattern) = 0;
  // Adds one to the counter `key` (created at 0) and returns the new value.
  virtual int64_t increment(const std::string& key) = 0;
  // The counter's value (0 when absent); Error naming the key when it holds no counter.
  virtual int64_t counter(const std::string& key) = 0;

  // Temporaries a dead writer left (dir: only: a killed put's half-written file): the path,
  // its age in seconds. A temporary whose writer still holds its lock is never listed.
  struct Temporary {
    std::string path;
    int64_t age_s = 0;
  };
  virtual std::vector<Temporary> dead_temporaries() { return {}; }
  // Removes one, re-checking under its lock that no writer holds it. False when one does.
  virtual bool remove_dead_temporary(const std::string& path) {
    (void)path;
    return false;
  }
};

// Opens the store at `uri` (the three forms above). Error naming the URI when it is malformed
// (a password inside the URI is refused by name) or the server cannot be reached.
std::unique_ptr<Backend> open_backend(const std::string& uri, const BackendOptions& options = {});

// The ':'-separated components of a key or a scan pattern ("a:b:" -> "a", "b", ""): the one
// splitter the layout, the matcher and the dir: backend's paths share.
std::vector<std::string_view> key_components(std::string_view key);

// Does `key` match `pattern` (the scan rule above)?
bool key_matches(std::string_view key, std::string_view pattern);

// Redis Cluster's hash slot of a key: CRC16 of its hash tag (the text inside the first
// non-empty {...}, else the whole key) mod 16384.
uint16_t redis_key_slot(std::string_view key);

// MOVED and ASK replies followed since the process started (tests and diagnostics).
struct RedirectCounts {
  uint64_t moved = 0, ask = 0;
};
RedirectCounts redis_redirects_followed();

// One backend per kind (dir_backend.cpp, redis_backend.cpp).
std::unique_ptr<Backend> open_dir_backend(const std::string& uri, const std::string& root);
std::unique_ptr<Backend> open_redis_backend(const std::string& uri, const BackendOptions& options);

}  // namespace ember::store
