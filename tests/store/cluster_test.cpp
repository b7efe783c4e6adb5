// A 3-node Redis Cluster on loopback (three real redis-server processes, `redis-cli --cluster
// create`): a put through one node's client is read through another; one snapshot's keys all
// live on one node (its seal is their hash tag); while its slot migrates (ASK) and after the
// move (MOVED), a client that learned the old owner still reads it whole.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <sstream>
#include <thread>

#include "kv/kv_test_util.h"
#include "store/redis_server.h"
#include "store/store.h"
#include "support/test_support.h"

namespace ember::store {
namespace {

struct Cluster {
  std::vector<std::unique_ptr<test::RedisServer>> nodes;
  std::string seeds(size_t first) const {
    std::string s;
    for (size_t i = 0; i < nodes.size(); ++i)
      s += (i ? "," : "") + std::string("127.0.0.1:") + std::to_string(nodes[(first + i) % nodes.size()]->port());
    return "redis+cluster://" + s;
  }
};

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);)
    if (!trim(l).empty()) out.push_back(trim(l));
  return out;
}

void start_cluster(Cluster& c, const std::string& dir) {
  std::string create = "--cluster create";
  for (int i = 0; i < 3; ++i) {
    const std::string d = dir + "/n" + std::to_string(i);
    ASSERT_EQ(test::run_command("mkdir -p " + d), 0);
    c.nodes.push_back(std::make_unique<test::RedisServer>(
        d, std::vector<std::string>{"--cluster-enabled", "yes", "--cluster-config-file", d + "/nodes.conf",
                                    "--cluster-node-timeout", "5000"},
        test::free_cluster_port()));
    create += " 127.0.0.1:" + std::to_string(c.nodes.back()->port());
  }
  std::string out;
  ASSERT_EQ(test::run_command("timeout 30 /usr/bin/redis-cli " + create + " --cluster-replicas 0 --cluster-yes", &out),
            0)
      << out;
  // Bounded wait until every node says the cluster is up.
  for (int i = 0; i < 100; ++i) {
    bool ok = true;
    for (auto& n : c.nodes) ok = ok && test::redis_cli(n->port(), "CLUSTER INFO").find("cluster_state:ok") != std::string::npos;
    if (ok) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  FAIL() << "the cluster did not reach cluster_state:ok within 10 s";
}

// The node (index) holding keys of the seal, and how many nodes hold any.
std::pair<int, int> owner_of(const Cluster& c, const std::string& seal, size_t* keys) {
  int owner = -1, holders = 0;
  *keys = 0;
  for (size_t i = 0; i < c.nodes.size(); ++i) {
    const auto k = lines(test::redis_cli(c.nodes[i]->port(), "--scan --pattern '*" + seal + "*'"));
    if (!k.empty()) owner = int(i), ++holders, *keys += k.size();
  }
  return {owner, holders};
}

TEST(StoreCluster, OneSnapshotLivesOnOneNodeAndMovedAndAskAreFollowed) {
  const std::string dir = test::temp_dir("store-cluster");
  Cluster c;
  start_cluster(c, dir);
  if (HasFatalFailure()) return;
  const kv::VerifiedState s = test::make_snapshot(2, 2, 64, 64);
  Store writer = Store::open(c.seeds(0));
  const PutResult r = writer.put(s, {"clustered", false, 4096});
  size_t keys = 0;
  const auto [owner, holders] = owner_of(c, r.seal, &keys);
  EXPECT_EQ(holders, 1);
  EXPECT_EQ(keys, r.chunks + 1);  // the chunks and the entry (the pending marker is gone)
  // Read through each of the other nodes as the first seed.
  for (size_t first : {size_t(1), size_t(2)}) {
    Store reader = Store::open(c.seeds(first));
    EXPECT_EQ(reader.get(reader.resolve(r.ns + "/clustered")).cache().k, s.cache().k);
  }
  EXPECT_TRUE(writer.verify().ok());

  // Move the slot to another node by hand, key by key: ASK while it migrates, MOVED after.
  const int to = (owner + 1) % 3;
  const int src_port = c.nodes[size_t(owner)]->port(), dst_port = c.nodes[size_t(to)]->port();
  const std::string slot = std::to_string(redis_key_slot(KeyLayout::entry(r.seal)));
  const std::string src_id = trim(test::redis_cli(src_port, "CLUSTER MYID"));
  const std::string dst_id = trim(test::redis_cli(dst_port, "CLUSTER MYID"));
  Store learned = Store::open(c.seeds(size_t(owner)));  // has read from the owner: caches it
  ASSERT_EQ(learned.get(r.seal).cache().v, s.cache().v);
  test::redis_cli(dst_port, "CLUSTER SETSLOT " + slot + " IMPORTING " + src_id);
  test::redis_cli(src_port, "CLUSTER SETSLOT " + slot + " MIGRATING " + dst_id);
  auto migrate = [&](const std::string& key) {
    const std::string out = test::redis_cli(
        src_port, "MIGRATE 127.0.0.1 " + std::to_string(dst_port) + " '" + key + "' 0 5000");
    EXPECT_NE(out.find("OK"), std::string::npos) << key << ": " << out;
  };
  migrate(KeyLayout::entry(r.seal));  // the record moved, its chunks not yet: the read needs ASK
  const RedirectCounts before = redis_redirects_followed();
  EXPECT_EQ(learned.get(r.seal).cache().k, s.cache().k);
  const RedirectCounts during = redis_redirects_followed();
  EXPECT_GT(during.ask, before.ask);
  EXPECT_EQ(during.moved, before.moved);
  for (const std::string& k : lines(test::redis_cli(src_port, "CLUSTER GETKEYSINSLOT " + slot + " 100000")))
    migrate(k);
  for (auto& n : c.nodes) test::redis_cli(n->port(), "CLUSTER SETSLOT " + slot + " NODE " + dst_id);
  EXPECT_EQ(learned.get(r.seal).cache().k, s.cache().k);  // MOVED, followed
  EXPECT_GT(redis_redirects_followed().moved, during.moved);
  const auto [owner2, holders2] = owner_of(c, r.seal, &keys);
  EXPECT_EQ(owner2, to);
  EXPECT_EQ(holders2, 1);
  EXPECT_TRUE(Store::open(c.seeds(2)).verify().ok());

  // rm through a node that does not own the slot: the chunks go by WATCH/MULTI/EXEC on the
  // owner (store.h remove_unless_exists), reached by following MOVED.
  const size_t other = size_t((to + 1) % 3);
  Store remover = Store::open(c.seeds(other));
  const GcResult g = remover.remove(r.seal);
  EXPECT_EQ(g.entries_removed, 1u);
  EXPECT_EQ(g.chunks_removed, r.chunks);
  owner_of(c, r.seal, &keys);
  EXPECT_EQ(keys, 0u);
  EXPECT_TRUE(remover.verify().ok());
}

}  // namespace
}  // namespace ember::store
