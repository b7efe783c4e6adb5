// redis:// and redis+cluster://: the store on a Redis (or Valkey) server through hiredis.
//
// hiredis connects, formats and writes commands. Replies are read by the small RESP2 reader
// below rather than hiredis's own, because a reply's size must be bounded *before* anything
// of that size is allocated: a hostile server's "$9223372036854775807" or "*2147483647" is
// refused from its header, and the bytes buffered for one reply never exceed the caller's
// max_bytes (plus a header's worth). hiredis 0.14 (Debian 12) has no element limit and
// computes bulk lengths without an overflow check.
//
// Cluster: a key's slot is CRC16(hash tag) mod 16384 (the tag is the text inside the key's
// first {...}, as Redis defines it); commands go to the node last learned for the slot (the
// first seed until then), a MOVED reply updates the slot's node and the command is sent again,
// an ASK reply sends ASKING then the command to the named node once. SCAN runs on every
// master (CLUSTER NODES).
#include <poll.h>
#include <sys/socket.h>

#include <hiredis/hiredis.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>

#include "store/backend.h"
#include "util/error.h"
#include "util/printable.h"

namespace ember::store {
namespace {

constexpr size_t kMaxLine = 64 * 1024;       // a status, error or integer line
constexpr size_t kMaxElements = 1u << 20;    // elements of one array reply
constexpr size_t kMaxScanReply = 16u << 20;  // bytes of one SCAN / CLUSTER NODES reply
constexpr int kMaxRedirects = 8;
std::atomic<uint64_t> g_moved{0}, g_ask{0};

struct Reply {
  enum Type { kString, kStatus, kError, kInteger, kNil, kArray } type = kNil;
  std::string str;  // string, status or error text
  long long integer = 0;
  std::vector<Reply> elements;
};

// The bounded RESP2 reader, incremental: feed() parses what the buffer holds from `pos` on and
// keeps its place (the arrays still open, and how many elements each still needs) across
// calls, so a reply of n elements arriving in k pieces costs O(n), not O(n k). An item is
// consumed only when it is whole (a bulk string with its CRLF); Error on anything malformed or
// larger than the limits, from its header.
class RespReader {
 public:
  RespReader(std::string where, size_t max_string) : where_(std::move(where)), max_string_(max_string) {}

  // True when the reply is complete (take() it); pos is advanced past every item consumed.
  bool feed(const std::string& buf, size_t& pos) {
    while (!done()) {
      Reply item;
      long long n = 0;
      if (!next(buf, pos, item, n)) return false;
      Reply* placed = place(std::move(item));
      if (placed->type == Reply::kArray && n > 0) {
        if (open_.size() >= 4) bad("arrays nested deeper than 4");
        open_.push_back({placed, size_t(n)});
      }
      while (!open_.empty() && open_.back().remaining == 0) open_.pop_back();
    }
    return true;
  }
  Reply take() { return std::move(root_); }

 private:
  struct Open {
    Reply* array;
    size_t remaining;
  };
  bool done() const { return started_ && open_.empty(); }

  // The slot for the next item: the root, or the next element of the innermost open array.
  // An array's elements grow only while it is the innermost open one, so pointers to open
  // arrays stay valid.
  Reply* place(Reply&& item) {
    if (!started_) {
      started_ = true;
      root_ = std::move(item);
      return &root_;
    }
    Open& o = open_.back();
    o.array->elements.push_back(std::move(item));
    --o.remaining;
    return &o.array->elements.back();
  }

  [[noreturn]] void bad(const std::string& what) const { fail_field(where_, "reply", "a RESP2 reply", what); }

  long long number(const std::string& s) const {
    size_t i = 0;
    const bool neg = !s.empty() && s[0] == '-';
    if (neg) i = 1;
    if (i == s.size() || s.size() - i > 18) bad("an integer field '" + printable(s) + "'");
    long long v = 0;
    for (; i < s.size(); ++i) {
      if (s[i] < '0' || s[i] > '9') bad("an integer field '" + printable(s) + "'");
      v = v * 10 + (s[i] - '0');
    }
    return neg ? -v : v;
  }

  // One whole item at pos (an array: its header only, n its element count); false, with pos
  // unchanged, while it is incomplete.
  bool next(const std::string& buf, size_t& pos, Reply& out, long long& n) {
    if (pos >= buf.size()) return false;
    const size_t e = buf.find("\r\n", pos + 1);
    if (e == std::string::npos) {
      if (buf.size() - pos > kMaxLine) bad("a line longer than " + std::to_string(kMaxLine) + " bytes");
      return false;
    }
    if (e - pos - 1 > kMaxLine) bad("a line longer than " + std::to_string(kMaxLine) + " bytes");
    const char t = buf[pos];
    const std::string l = buf.substr(pos + 1, e - pos - 1);
    size_t after = e + 2;
    switch (t) {
      case '+': out.type = Reply::kStatus; out.str = l; break;
      case '-': out.type = Reply::kError; out.str = l; break;
      case ':': out.type = Reply::kInteger; out.integer = number(l); break;
      case '$': {
        const long long len = number(l);
        if (len == -1) {
          out.type = Reply::kNil;
          break;
        }
        if (len < 0) bad("a bulk length " + l);
        if (uint64_t(len) > max_string_)
          fail_field(where_, "reply", "a value of at most " + std::to_string(max_string_) + " bytes",
                     std::to_string(len) + " bytes");
        if (buf.size() - after < size_t(len) + 2) return false;
        if (buf.compare(after + size_t(len), 2, "\r\n") != 0) bad("a bulk string not ended by CRLF");
        out.type = Reply::kString;
        out.str.assign(buf, after, size_t(len));
        after += size_t(len) + 2;
        break;
      }
      case '*': {
        n = number(l);
        if (n == -1) {
          out.type = Reply::kNil;
          n = 0;
          break;
        }
        if (n < 0 || uint64_t(n) > kMaxElements)
          fail_field(where_, "reply", "an array of at most " + std::to_string(kMaxElements) + " elements",
                     l + " elements");
        out.type = Reply::kArray;
        break;
      }
      default:
        bad(std::string("a type byte '") + printable(std::string(1, t)) + "'");
    }
    pos = after;
    return true;
  }

  std::string where_;
  size_t max_string_;
  Reply root_;
  bool started_ = false;
  std::vector<Open> open_;
};

// One connection to one node.
class Conn {
 public:
  Conn(const std::string& uri, const std::string& host, int port, const BackendOptions& o, const std::string& user,
       int db)
      : where_(uri + " (" + host + ":" + std::to_string(port) + ")"),
        timeout_ms_(std::max(1, o.timeout_ms)),
        deadline_ms_(std::max(1, o.reply_deadline_ms)) {
    timeval tv{o.timeout_ms / 1000, (o.timeout_ms % 1000) * 1000};
    c_ = redisConnectWithTimeout(host.c_str(), port, tv);
    if (!c_) fail(where_, "cannot allocate a connection");
    // A constructor that throws runs no destructor: the context is freed here on every error.
    try {
      if (c_->err) fail_field(where_, "connection", "a reachable Redis server", c_->errstr);
      if (redisSetTimeout(c_, tv) != REDIS_OK) fail(where_, "cannot set the socket timeout");
      if (!o.password.empty()) {
        const Reply r = user.empty() ? command({"AUTH", o.password}, kMaxLine)
                                     : command({"AUTH", user, o.password}, kMaxLine);
        if (r.type == Reply::kError) fail_field(where_, "AUTH", "the password to be accepted", r.str);
      }
      if (db != 0) {
        const Reply r = command({"SELECT", std::to_string(db)}, kMaxLine);
        if (r.type == Reply::kError) fail_field(where_, "SELECT", "database " + std::to_string(db), r.str);
      }
    } catch (...) {
      redisFree(c_);
      c_ = nullptr;
      throw;
    }
  }
  ~Conn() {
    if (c_) redisFree(c_);
  }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  void send(const std::vector<std::string_view>& argv) {
    std::vector<const char*> a;
    std::vector<size_t> n;
    size_t bytes = 0;
    for (std::string_view s : argv) {
      a.push_back(s.data());
      n.push_back(s.size());
      bytes += s.size();
    }
    if (redisAppendCommandArgv(c_, int(a.size()), a.data(), n.data()) != REDIS_OK)
      fail(where_, std::string("cannot queue a command: ") + c_->errstr);
    const Clock::time_point start = Clock::now();
    int done = 0;
    while (!done) {
      if (redisBufferWrite(c_, &done) != REDIS_OK)
        fail(where_, std::string("write failed: ") + (errno == EAGAIN ? "timed out" : c_->errstr));
      // A server that reads a byte at a time would otherwise hold each write to one timeout.
      if (!done && Clock::now() - start > deadline(bytes))
        fail_field(where_, "send", "a command sent within " + deadline_text(), "a server reading too slowly");
    }
  }

  // One reply, at most max_string bytes per string and max_string + 64 KiB in all, whole
  // within the reply deadline (BackendOptions::reply_deadline_ms).
  Reply receive(size_t max_string) {
    RespReader reader(where_, max_string);
    const size_t cap = max_string + kMaxLine + 64;
    const Clock::time_point start = Clock::now();
    size_t received = buf_.size() - pos_;  // bytes of this reply seen so far
    while (true) {
      if (reader.feed(buf_, pos_)) {
        compact(true);
        return reader.take();
      }
      compact(false);
      if (received > cap) fail_field(where_, "reply", "at most " + std::to_string(cap) + " bytes", "more");
      const auto left = deadline(received) - (Clock::now() - start);
      if (left <= Clock::duration::zero())
        fail_field(where_, "reply", "a whole reply within " + deadline_text(),
                   std::to_string(received) + " bytes after " + seconds_since(start));
      const int wait_ms = int(std::min<int64_t>(
          timeout_ms_, std::chrono::duration_cast<std::chrono::milliseconds>(left).count() + 1));
      pollfd p{c_->fd, POLLIN, 0};
      const int ready = ::poll(&p, 1, wait_ms);
      if (ready < 0 && errno == EINTR) continue;
      if (ready < 0) fail(where_, std::string("poll failed: ") + std::strerror(errno));
      if (ready == 0) {
        if (wait_ms >= timeout_ms_) fail(where_, "timed out waiting for a reply");
        continue;  // the deadline check above names it
      }
      char tmp[64 * 1024];
      const ssize_t got = ::recv(c_->fd, tmp, sizeof tmp, 0);
      if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
      if (got <= 0) fail(where_, "connection closed by the server");
      buf_.append(tmp, size_t(got));
      received += size_t(got);
    }
  }

  // A command and its reply. After an Error in either (a refused header leaves the rest of
  // that reply unread; a deadline leaves it half-sent) the connection is out of step with
  // the server: it is marked broken and the backend opens a new one for the next command, so
  // a caller that catches the Error (a bad hits counter in ls) never reads a stale reply.
  Reply command(const std::vector<std::string_view>& argv, size_t max_string) {
    try {
      send(argv);
      return receive(max_string);
    } catch (...) {
      broken_ = true;
      throw;
    }
  }

  const std::string& where() const { return where_; }
  bool broken() const { return broken_; }

 private:
  using Clock = std::chrono::steady_clock;

  // The allowance for a reply (or a send) that has carried `bytes`: the base deadline plus
  // 1 s per MiB, so a drip is cut off and a big honest transfer is not.
  Clock::duration deadline(size_t bytes) const {
    return std::chrono::milliseconds(deadline_ms_) + std::chrono::milliseconds(int64_t(bytes >> 20) * 1000);
  }
  std::string deadline_text() const {
    return std::to_string(deadline_ms_) + " ms (+1 s per MiB received)";
  }
  static std::string seconds_since(Clock::time_point t) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
    return std::to_string(ms / 1000) + "." + std::to_string(ms % 1000 / 100) + " s";
  }
  // Drops consumed bytes: always after a whole reply, else once they are worth a copy.
  void compact(bool whole) {
    if (whole || pos_ > (size_t(1) << 20)) {
      buf_.erase(0, pos_);
      pos_ = 0;
    }
  }

  std::string where_;
  redisContext* c_ = nullptr;
  std::string buf_;
  size_t pos_ = 0;  // buf_ before pos_ is consumed
  bool broken_ = false;
  int timeout_ms_ = 5000, deadline_ms_ = 10000;
};

// Redis Cluster's key slot (CRC16-CCITT/XMODEM of the hash tag, mod 16384).
uint16_t crc16(std::string_view s) {
  uint16_t crc = 0;
  for (unsigned char ch : s) {
    crc ^= uint16_t(ch) << 8;
    for (int i = 0; i < 8; ++i) crc = (crc & 0x8000) ? uint16_t((crc << 1) ^ 0x1021) : uint16_t(crc << 1);
  }
  return crc;
}

}  // namespace

RedirectCounts redis_redirects_followed() { return {g_moved.load(), g_ask.load()}; }

uint16_t redis_key_slot(std::string_view key) {
  const size_t b = key.find('{');
  if (b != std::string_view::npos) {
    const size_t e = key.find('}', b + 1);
    if (e != std::string_view::npos && e > b + 1) key = key.substr(b + 1, e - b - 1);
  }
  return uint16_t(crc16(key) % 16384);
}

namespace {

struct Address {
  std::string host;
  int port = 0;
  std::string str() const { return host + ":" + std::to_string(port); }
};

Address parse_address(const std::string& uri, const std::string& s) {
  const size_t c = s.rfind(':');
  if (c == std::string::npos || c == 0) fail_field(uri, "host:port", "HOST:PORT", "'" + s + "'");
  Address a;
  a.host = s.substr(0, c);
  const std::string p = s.substr(c + 1);
  if (p.empty() || p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos)
    fail_field(uri, "port", "1..65535", "'" + p + "'");
  a.port = std::stoi(p);
  if (a.port < 1 || a.port > 65535) fail_field(uri, "port", "1..65535", p);
  for (char ch : a.host)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-'))
      fail_field(uri, "host", "a host name or IPv4 address", "'" + a.host + "'");
  return a;
}

class RedisBackend final : public Backend {
 public:
  RedisBackend(const std::string& uri, const BackendOptions& o) : uri_(uri), options_(o) {
    cluster_ = uri.rfind("redis+cluster://", 0) == 0;
    std::string rest = uri.substr(cluster_ ? 16 : 8);
    const size_t at = rest.find('@');
    if (at != std::string::npos) {
      user_ = rest.substr(0, at);
      if (user_.find(':') != std::string::npos)  // named without echoing the password
        fail_field(std::string(cluster_ ? "redis+cluster://" : "redis://") + "..." + rest.substr(at), "password",
                   "no password in the URI (set EMBER_REDIS_PASSWORD or --password-file)", "user:password@");
      if (user_.empty()) fail_field(uri, "user", "a user name before '@'", "none");
      rest = rest.substr(at + 1);
    }
    const size_t slash = rest.find('/');
    if (slash != std::string::npos) {
      const std::string d = rest.substr(slash + 1);
      if (d.empty() || d.size() > 4 || d.find_first_not_of("0123456789") != std::string::npos)
        fail_field(uri, "db", "a database number 0..9999", "'" + d + "'");
      db_ = std::stoi(d);
      if (cluster_ && db_ != 0) fail_field(uri, "db", "0 (Redis Cluster has one database)", d);
      rest = rest.substr(0, slash);
    }
    size_t b = 0;
    while (true) {
      const size_t e = rest.find(',', b);
      seeds_.push_back(parse_address(uri, rest.substr(b, e == std::string::npos ? std::string::npos : e - b)));
      if (e == std::string::npos) break;
      if (!cluster_) fail_field(uri, "host:port", "one node (redis+cluster:// for several)", rest);
      b = e + 1;
    }
    conn(seeds_[0]);  // connect (and authenticate) now: a wrong URI fails here
  }

  const std::string& uri() const override { return uri_; }

  std::optional<std::string> get(const std::string& key, size_t max_bytes) override {
    Reply r = keyed(key, {"GET", key}, max_bytes);
    if (r.type == Reply::kNil) return std::nullopt;
    expect(r, Reply::kString, "GET", key);
    return std::move(r.str);
  }
  bool create(const std::string& key, std::string_view value) override {
    const Reply r = keyed(key, {"SET", key, value, "NX"}, kMaxLine);
    if (r.type == Reply::kNil) return false;
    expect(r, Reply::kStatus, "SET NX", key);
    return true;
  }
  void replace(const std::string& key, std::string_view value) override {
    expect(keyed(key, {"SET", key, value}, kMaxLine), Reply::kStatus, "SET", key);
  }
  bool exists(const std::string& key) override {
    const Reply r = keyed(key, {"EXISTS", key}, kMaxLine);
    expect(r, Reply::kInteger, "EXISTS", key);
    return r.integer > 0;
  }
  void remove(const std::string& key) override { expect(keyed(key, {"DEL", key}, kMaxLine), Reply::kInteger, "DEL", key); }
  int64_t increment(const std::string& key) override {
    const Reply r = keyed(key, {"INCR", key}, kMaxLine);
    expect(r, Reply::kInteger, "INCR", key);
    return r.integer;
  }
  int64_t counter(const std::string& key) override {
    const std::optional<std::string> v = get(key, 32);
    if (!v) return 0;
    if (v->empty() || v->size() > 18 || v->find_first_not_of("0123456789") != std::string::npos)
      fail_field(uri_, key, "a counter (decimal digits)", "'" + *v + "'");
    return std::stoll(*v);
  }

  std::vector<std::string> scan(const std::string& pattern) override {
    std::vector<std::string> out;
    std::vector<Address> nodes = seeds_;
    if (cluster_) nodes = masters();
    for (const Address& a : nodes) {
      Conn& c = conn(a);
      const size_t max_calls = scan_call_bound(c);
      std::string cursor = "0";
      for (size_t call = 0;; ++call) {
        // Redis ends a full iteration with cursor 0 after about (table size / COUNT) calls; a
        // server whose cursor never comes back would otherwise keep ember listing forever.
        if (call == max_calls)
          fail_field(c.where(), "SCAN", "a cursor back at 0 within " + std::to_string(max_calls) + " calls",
                     "cursor '" + printable(cursor) + "' after " + std::to_string(max_calls) + " calls");
        const Reply r = c.command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"}, kMaxScanReply);
        if (r.type == Reply::kError) expect(r, Reply::kArray, "SCAN", pattern);
        if (r.type != Reply::kArray || r.elements.size() != 2 || r.elements[0].type != Reply::kString ||
            r.elements[1].type != Reply::kArray)
          fail_field(c.where(), "SCAN", "[cursor, [keys]]", describe(r));
        for (const Reply& k : r.elements[1].elements) {
          if (k.type != Reply::kString) fail_field(c.where(), "SCAN", "key strings", describe(k));
          if (key_matches(k.str, pattern)) out.push_back(k.str);
          if (out.size() > 50'000'000) fail_field(c.where(), "SCAN", "at most 50M keys", "more");
        }
        cursor = r.elements[0].str;
        if (cursor == "0") break;
      }
    }
    return out;
  }

  bool remove_unless_exists(const std::string& guard, const std::vector<std::string>& keys) override {
    // WATCH makes EXEC fail (a nil reply) if anything wrote `guard` after this point: a put
    // that publishes the entry between our EXISTS and EXEC keeps its chunks.
    expect(keyed(guard, {"WATCH", guard}, kMaxLine), Reply::kStatus, "WATCH", guard);
    Conn& c = conn(node_of(guard));
    const Reply e = c.command({"EXISTS", guard}, kMaxLine);
    if (e.type != Reply::kInteger || e.integer > 0) {
      c.command({"UNWATCH"}, kMaxLine);
      expect(e, Reply::kInteger, "EXISTS", guard);
      return false;
    }
    expect(c.command({"MULTI"}, kMaxLine), Reply::kStatus, "MULTI", guard);
    for (size_t i = 0; i < keys.size(); i += 256) {
      std::vector<std::string_view> argv = {"DEL"};
      for (size_t k = i; k < std::min(keys.size(), i + 256); ++k) argv.push_back(keys[k]);
      const Reply q = c.command(argv, kMaxLine);
      if (q.type != Reply::kStatus) {
        c.command({"DISCARD"}, kMaxLine);
        expect(q, Reply::kStatus, "DEL (in MULTI)", keys[i]);
      }
    }
    const Reply x = c.command({"EXEC"}, kMaxLine);
    if (x.type == Reply::kNil) return false;
    expect(x, Reply::kArray, "EXEC", guard);
    return true;
  }

 private:
  // How many SCAN calls one node may take: generous for its DBSIZE (a table of n keys has at
  // most about 2n buckets, COUNT 1000 visits about 1000 per call), or a fixed bound when the
  // ACL denies DBSIZE.
  size_t scan_call_bound(Conn& c) {
    const Reply r = c.command({"DBSIZE"}, kMaxLine);
    if (r.type != Reply::kInteger || r.integer < 0) return 100'000;
    return 64 + 4 * (size_t(std::min<long long>(r.integer, 1LL << 40)) / 1000 + 1);
  }

  Address node_of(const std::string& key) const {
    if (auto it = slots_.find(redis_key_slot(key)); it != slots_.end()) return it->second;
    return seeds_[0];
  }

  static std::string describe(const Reply& r) {
    switch (r.type) {
      case Reply::kString: return "a string";
      case Reply::kStatus: return "status '" + printable(r.str) + "'";
      case Reply::kError: return "error '" + printable(r.str) + "'";
      case Reply::kInteger: return "an integer";
      case Reply::kNil: return "nil";
      case Reply::kArray: return "an array of " + std::to_string(r.elements.size());
    }
    return "?";
  }

  void expect(const Reply& r, Reply::Type t, const char* cmd, const std::string& key) const {
    if (r.type == t) return;
    if (r.type == Reply::kError && r.str.rfind("NOAUTH", 0) == 0)
      fail_field(uri_, cmd, "an authenticated connection (set EMBER_REDIS_PASSWORD or --password-file)", r.str);
    fail_field(uri_ + ": " + key, cmd, "a reply", describe(r));
  }

  Conn& conn(const Address& a) {
    auto it = conns_.find(a.str());
    if (it != conns_.end() && !it->second->broken()) return *it->second;
    if (it != conns_.end()) conns_.erase(it);
    auto c = std::make_unique<Conn>(uri_, a.host, a.port, options_, user_, db_);
    Conn& ref = *c;
    conns_[a.str()] = std::move(c);
    return ref;
  }

  // Sends a one-key command to the key's node, following MOVED and ASK.
  Reply keyed(const std::string& key, const std::vector<std::string_view>& argv, size_t max_string) {
    const uint16_t slot = redis_key_slot(key);
    Address a = node_of(key);
    bool asking = false;
    for (int i = 0; i <= kMaxRedirects; ++i) {
      Conn& c = conn(a);
      if (asking) {
        const Reply ok = c.command({"ASKING"}, kMaxLine);
        if (ok.type != Reply::kStatus) fail_field(c.where(), "ASKING", "+OK", describe(ok));
      }
      Reply r = c.command(argv, max_string);
      if (r.type != Reply::kError) return r;
      const bool moved = r.str.rfind("MOVED ", 0) == 0, ask = r.str.rfind("ASK ", 0) == 0;
      if (!moved && !ask) return r;
      if (!cluster_) fail_field(c.where(), key, "a reply (the URI names one node; use redis+cluster://)", r.str);
      const size_t sp = r.str.rfind(' ');
      a = parse_address(uri_, r.str.substr(sp + 1));
      if (moved) slots_[slot] = a;
      ++(moved ? g_moved : g_ask);
      asking = ask;
    }
    fail_field(uri_ + ": " + key, "redirects", "at most " + std::to_string(kMaxRedirects), "more");
  }

  // The masters of the cluster, from CLUSTER NODES on the first seed.
  std::vector<Address> masters() {
    Conn& c = conn(seeds_[0]);
    const Reply r = c.command({"CLUSTER", "NODES"}, kMaxScanReply);
    if (r.type == Reply::kError) expect(r, Reply::kString, "CLUSTER NODES", "");
    if (r.type != Reply::kString) fail_field(c.where(), "CLUSTER NODES", "a string", describe(r));
    std::vector<Address> out;
    size_t b = 0;
    while (b < r.str.size()) {
      size_t e = r.str.find('\n', b);
      if (e == std::string::npos) e = r.str.size();
      const std::string line = r.str.substr(b, e - b);
      b = e + 1;
      std::vector<std::string> f;
      for (size_t i = 0; i < line.size();) {
        size_t j = line.find(' ', i);
        if (j == std::string::npos) j = line.size();
        f.push_back(line.substr(i, j - i));
        i = j + 1;
      }
      if (f.size() < 8 || f[2].find("master") == std::string::npos || f[2].find("fail") != std::string::npos)
        continue;
      std::string addr = f[1].substr(0, f[1].find('@'));
      out.push_back(parse_address(uri_, addr));
    }
    if (out.empty()) fail_field(c.where(), "CLUSTER NODES", "at least one master", "none");
    return out;
  }

  std::string uri_;
  BackendOptions options_;
  bool cluster_ = false;
  std::string user_;
  int db_ = 0;
  std::vector<Address> seeds_;
  std::map<std::string, std::unique_ptr<Conn>> conns_;
  std::map<uint16_t, Address> slots_;
};

}  // namespace

std::unique_ptr<Backend> open_redis_backend(const std::string& uri, const BackendOptions& options) {
  return std::make_unique<RedisBackend>(uri, options);
}

}  // namespace ember::store
