// The store's contract on both backends (dir: and a real redis-server): round trip, a second
// put of the same state is a no-op, one winner per name, namespaces, every get verifying
// every chunk (corrupt and missing chunks named), hostile records refused, gc and verify.
#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include "kv/kv_test_util.h"
#include "store/store_fixture.h"
#include "store/store.h"
#include "support/test_support.h"

namespace ember::store {
namespace {

using test::error_of;

class StoreBackends : public StoreFixture {};

bool same_cache(const model::KvCache& a, const model::KvCache& b) {
  if (a.n_pos != b.n_pos || a.n_layers != b.n_layers || a.n_kv_heads != b.n_kv_heads || a.head_dim != b.head_dim)
    return false;
  for (int l = 0; l < a.n_layers; ++l)
    for (int h = 0; h < a.n_kv_heads; ++h)
      for (int p = 0; p < a.n_pos; ++p)
        for (int d = 0; d < a.head_dim; ++d)
          if (a.k_row(l, h, p)[d] != b.k_row(l, h, p)[d] || a.v_row(l, h, p)[d] != b.v_row(l, h, p)[d]) return false;
  return true;
}

TEST_P(StoreBackends, RoundTripIsExactAndASecondPutIsANoOp) {
  const kv::VerifiedState s = test::make_snapshot(2, 2, 64, 40, 1, 48);
  Store st = open();
  const PutResult a = st.put(s, {"first", false, 4096});
  EXPECT_TRUE(a.stored);
  EXPECT_EQ(a.seal, s.manifest().seal);
  EXPECT_EQ(a.chunks, 2u * 5u);  // 2*2*40*64*2 = 20480 bytes per payload: 5 chunks of 4096
  EXPECT_EQ(a.prefix_keys, 2u);  // 40 tokens: two full 16-token blocks
  const kv::VerifiedState g = st.get(st.resolve(a.ns + "/first"));
  EXPECT_EQ(g.manifest().seal, a.seal);
  EXPECT_TRUE(same_cache(g.cache(), s.cache()));
  const PutResult b = st.put(s, {"first", false, 4096});
  EXPECT_FALSE(b.stored);
  EXPECT_EQ(b.chunks_written, 0u);
  EXPECT_EQ(b.prefix_keys, 0u);
  EXPECT_EQ(st.stats().entries, 1u);
  EXPECT_EQ(st.stats().hits, 1);
  EXPECT_TRUE(st.verify().ok());
}

TEST_P(StoreBackends, ANameHasOneStateUnlessForced) {
  Store st = open();
  const kv::VerifiedState a = test::make_snapshot(1, 1, 64, 20, 1), b = test::make_snapshot(1, 1, 64, 20, 1);
  kv::VerifiedState c = test::make_snapshot(1, 1, 64, 21, 1);  // same model, another state
  const PutResult ra = st.put(a, {"n", false, 4096});
  EXPECT_NE(error_of([&] { st.put(c, {"n", false, 4096}); }).find("--force points it at this state"),
            std::string::npos);
  EXPECT_EQ(st.resolve(ra.ns + "/n"), ra.seal);
  const PutResult rc = st.put(c, {"n", true, 4096});
  EXPECT_EQ(st.resolve(ra.ns + "/n"), rc.seal);
  st.put(b, {"n2", false, 4096});
  // Two writers race for one new name with different states: exactly one wins.
  kv::VerifiedState d = test::make_snapshot(1, 1, 64, 22, 1), e = test::make_snapshot(1, 1, 64, 23, 1);
  std::string err[2];
  std::thread t1([&] { err[0] = error_of([&] { Store::open(uri_).put(d, {"race", false, 4096}); }); });
  std::thread t2([&] { err[1] = error_of([&] { Store::open(uri_).put(e, {"race", false, 4096}); }); });
  t1.join();
  t2.join();
  EXPECT_TRUE(err[0].empty() != err[1].empty()) << err[0] << " | " << err[1];
  const std::string won = st.resolve(ra.ns + "/race");
  EXPECT_TRUE(won == d.manifest().seal || won == e.manifest().seal);
}

TEST_P(StoreBackends, NamespacesSeparateModels) {
  Store st = open();
  const kv::VerifiedState a = test::make_snapshot(1, 1, 64, 32, 1), b = test::make_snapshot(1, 1, 64, 32, 2);
  const PutResult ra = st.put(a, {"x", false, 4096}), rb = st.put(b, {"x", false, 4096});
  EXPECT_NE(ra.ns, rb.ns);
  EXPECT_EQ(st.resolve(ra.ns + "/x"), ra.seal);
  EXPECT_EQ(st.resolve(rb.ns + "/x"), rb.seal);
  // The same tokens under the other model's namespace find only that model's state.
  const auto chain_a = prefix_chain(ra.ns, a.manifest().prefix.tokens);
  EXPECT_EQ(st.prefix_lookup(ra.ns, chain_a.back()), ra.seal);
  EXPECT_FALSE(st.prefix_lookup(rb.ns, chain_a.back()).has_value());
  EXPECT_NE(error_of([&] { st.resolve(rb.ns + "/missing"); }).find("none"), std::string::npos);
}

TEST_P(StoreBackends, ACorruptChunkIsNamedAndNeverReturned) {
  Store st = open();
  const kv::VerifiedState s = test::make_snapshot(2, 2, 64, 40);
  const PutResult r = st.put(s, {"c", false, 4096});
  const Entry e = st.read_entry(r.seal);
  const std::string key = KeyLayout::chunk(r.seal, e.chunks[1][2]);
  std::string bytes = *st.backend().get(key, 1 << 20);
  bytes[100] ^= 0x01;
  poke(key, bytes);
  const std::string err = error_of([&] { st.get(r.seal); });
  EXPECT_NE(err.find("chunk " + key + " (payload.values chunk 3 of 5): sha256"), std::string::npos) << err;
  EXPECT_NE(err.find("(corrupt)"), std::string::npos) << err;
  EXPECT_FALSE(st.verify().ok());
  // A re-put of the same state repairs it (chunks are rewritten, the record kept).
  st.put(s, {});
  EXPECT_TRUE(st.verify().ok());
  EXPECT_TRUE(same_cache(st.get(r.seal).cache(), s.cache()));
}

TEST_P(StoreBackends, AMissingChunkIsNamed) {
  Store st = open();
  const kv::VerifiedState s = test::make_snapshot(2, 2, 64, 40);
  const PutResult r = st.put(s, {"m", false, 4096});
  const std::string key = KeyLayout::chunk(r.seal, st.read_entry(r.seal).chunks[0][0]);
  st.backend().remove(key);
  const std::string err = error_of([&] { st.get(r.seal); });
  EXPECT_NE(err.find("chunk " + key + " (payload.keys chunk 1 of 5): expected present, found missing"),
            std::string::npos)
      << err;
  // A chunk of the wrong length (a truncated write, or a server handing back more).
  st.put(s, {});
  poke(key, std::string(100, 'x'));
  EXPECT_NE(error_of([&] { st.get(r.seal); }).find("expected 4096 bytes, found 100 bytes"), std::string::npos);
  poke(key, std::string(5000, 'x'));
  EXPECT_NE(error_of([&] { st.get(r.seal); }).find("at most 4096 bytes"), std::string::npos);
}

TEST_P(StoreBackends, HostileRecordsAreRefusedByField) {
  Store st = open();
  const kv::VerifiedState s = test::make_snapshot(1, 1, 64, 20);
  const PutResult r = st.put(s, {"h", false, 4096});
  const std::string key = KeyLayout::entry(r.seal);
  const std::string good = *st.backend().get(key, 1 << 24);
  auto edited = [&](const std::function<void(nlohmann::json&)>& fn) {
    nlohmann::json j = nlohmann::json::parse(good);
    fn(j);
    poke(key, j.dump());
    return error_of([&] { st.get(r.seal); });
  };
  EXPECT_NE(edited([](nlohmann::json& j) { j["extra"] = 1; }).find("extra"), std::string::npos);
  EXPECT_NE(edited([](nlohmann::json& j) { j["namespace"] = std::string(32, '0'); }).find("namespace"),
            std::string::npos);
  EXPECT_NE(edited([](nlohmann::json& j) { j["chunks"]["keys"].erase(0); }).find("chunks.keys"), std::string::npos);
  EXPECT_NE(edited([](nlohmann::json& j) {
              std::string m = j["manifest"];
              m.replace(m.find("ember test"), 10, "ember tesT");  // an edit that leaves the seal as it was
              j["manifest"] = m;
            }).find("seal"),
            std::string::npos);
  // Another state's record under this seal's key.
  const kv::VerifiedState o = test::make_snapshot(1, 1, 64, 21);
  const PutResult ro = st.put(o, {});
  poke(key, *st.backend().get(KeyLayout::entry(ro.seal), 1 << 24));
  EXPECT_NE(error_of([&] { st.get(r.seal); }).find("seal: expected " + r.seal + " (the key)"), std::string::npos);
  poke(key, "{\"format\":");
  EXPECT_NE(error_of([&] { st.get(r.seal); }).find(key), std::string::npos);
}

TEST_P(StoreBackends, GcRemovesOldStatesDeadPutsAndDanglingPointers) {
  Store st = open();
  Backend& b = st.backend();
  const kv::VerifiedState a = test::make_snapshot(1, 1, 64, 32, 1), c = test::make_snapshot(1, 1, 64, 33, 1);
  const PutResult ra = st.put(a, {"a", false, 4096});
  const PutResult rc = st.put(c, {"c", false, 4096});
  // A dead put: chunks and an old pending marker, no record. A live one: a fresh marker.
  const std::string dead(64, 'd'), live(64, 'e');
  b.replace(KeyLayout::pending(dead), "1");
  b.replace(KeyLayout::chunk(dead, std::string(64, '1')), "xx");
  b.replace(KeyLayout::pending(live), std::to_string(int64_t(std::time(nullptr))));
  b.replace(KeyLayout::chunk(live, std::string(64, '2')), "yy");
  b.replace(KeyLayout::name(ra.ns, "dangling"), std::string(64, 'f'));
  const VerifyResult v = st.verify();
  EXPECT_EQ(v.entries_ok, 2u);
  EXPECT_EQ(v.findings.size(), 3u);  // two orphan groups and one dangling name
  GcResult g = st.gc({});
  EXPECT_EQ(g.entries_removed, 0u);
  EXPECT_EQ(g.chunks_removed, 1u);  // the dead put's; the live one's is kept
  EXPECT_EQ(g.names_removed, 1u);
  EXPECT_TRUE(b.exists(KeyLayout::chunk(live, std::string(64, '2'))));
  // Size budget: the oldest state goes first (stored_at ties break by seal), with its
  // name and prefix keys.
  GcOptions budget;
  budget.max_bytes = 2 * c.manifest().payload_bytes();
  budget.grace_s = 0;
  g = st.gc(budget);
  EXPECT_EQ(g.entries_removed, 1u);
  EXPECT_EQ(g.entries_kept, 1u);
  EXPECT_TRUE(st.verify().ok());
  const std::string kept = b.exists(KeyLayout::entry(ra.seal)) ? ra.seal : rc.seal;
  EXPECT_EQ(st.catalog().names.size(), 1u);
  EXPECT_EQ(st.catalog().names.begin()->second, kept);
  // Age: everything stored more than -1 s ago... i.e. now, by a clock a day ahead.
  GcOptions age;
  age.older_than_s = 3600;
  age.now = int64_t(std::time(nullptr)) + 86400;
  g = st.gc(age);
  EXPECT_EQ(g.entries_removed, 1u);
  const StoreStats t = st.stats();
  EXPECT_EQ(t.entries + t.chunks + t.names + t.prefix_keys, 0u);
}

TEST_P(StoreBackends, RmOfANameKeepsAStateAnotherNameHolds) {
  Store st = open();
  const kv::VerifiedState a = test::make_snapshot(1, 1, 64, 32);
  const PutResult r = st.put(a, {"one", false, 4096});
  st.put(a, {"two", false, 4096});
  GcResult g = st.remove(r.ns + "/one");
  EXPECT_EQ(g.entries_removed, 0u);
  EXPECT_EQ(st.resolve(r.ns + "/two"), r.seal);
  g = st.remove(r.ns + "/two");
  EXPECT_EQ(g.entries_removed, 1u);
  EXPECT_EQ(g.prefixes_removed, 2u);
  EXPECT_TRUE(st.verify().ok());
  EXPECT_EQ(st.stats().chunks, 0u);
}

INSTANTIATE_TEST_SUITE_P(Store, StoreBackends, ::testing::Values("dir", "redis"));

TEST(StoreLayout, ThePrefixChainIsFixed) {
  // Pinned: a change of the definition (docs/store.md) changes these and every stored index.
  std::vector<int32_t> t(40);
  for (int i = 0; i < 40; ++i) t[size_t(i)] = i * 7;
  const std::string ns(32, 'a');
  const std::vector<std::string> c = prefix_chain(ns, t);
  ASSERT_EQ(c.size(), 2u);
  Sha256 h0;
  h0.update_field("ember.prefix-chain.v1");
  h0.update_field(ns);
  const Digest d0 = h0.finish();
  Sha256 h1;
  h1.update(d0.data(), 32);
  h1.update(t.data(), 16 * 4);  // little-endian host: the ids' bytes as they are
  EXPECT_EQ(c[0], to_hex(h1.finish()));
  EXPECT_EQ(prefix_chain(ns, std::span<const int32_t>(t).first(32)), c);
  t[17] = 1;
  EXPECT_EQ(prefix_chain(ns, t)[0], c[0]);
  EXPECT_NE(prefix_chain(ns, t)[1], c[1]);
  EXPECT_NE(prefix_chain(std::string(32, 'b'), t)[0], c[0]);
}

TEST(StoreLayout, RedisClusterSlotsFollowHashTags) {
  EXPECT_EQ(redis_key_slot("123456789"), 0x31C3 % 16384);  // CRC16/XMODEM check value
  const std::string seal(64, 'a');
  EXPECT_EQ(redis_key_slot(KeyLayout::entry(seal)), redis_key_slot(KeyLayout::chunk(seal, std::string(64, '0'))));
  EXPECT_EQ(redis_key_slot(KeyLayout::entry(seal)), redis_key_slot(KeyLayout::hits(seal)));
  EXPECT_EQ(redis_key_slot("{user1000}.following"), redis_key_slot("{user1000}.followers"));
}

TEST(StoreLayout, EveryKeyParsesBackToWhatBuiltIt) {
  const std::string seal(64, 'a'), sha(64, 'b'), ns(32, 'c');
  using K = ParsedKey::Kind;
  const std::vector<std::tuple<std::string, K, std::string, std::string>> cases = {
      {KeyLayout::entry(seal), K::entry, seal, ""},
      {KeyLayout::chunk(seal, sha), K::chunk, seal, sha},
      {KeyLayout::pending(seal), K::pending, seal, ""},
      {KeyLayout::hits(seal), K::hits, seal, ""},
      {KeyLayout::signature(seal, sha), K::signature, seal, sha},
      {KeyLayout::name(ns, "my.name"), K::name, ns, "my.name"},
      {KeyLayout::prefix(ns, sha), K::prefix, ns, sha},
  };
  for (const auto& [key, kind, tag, leaf] : cases) {
    const std::optional<ParsedKey> p = KeyLayout::parse(key);
    ASSERT_TRUE(p.has_value()) << key;
    EXPECT_EQ(p->kind, kind) << key;
    EXPECT_EQ(p->tag, tag) << key;
    EXPECT_EQ(p->leaf, leaf) << key;
  }
  EXPECT_TRUE(key_matches(KeyLayout::chunk(seal, sha), KeyLayout::kChunks));
  EXPECT_TRUE(key_matches(KeyLayout::name(ns, "n"), KeyLayout::kNames));
  for (const std::string& bad : {"ember:v1:s:{" + std::string(63, 'a') + "}:entry", "ember:v1:s:{" + seal + "}:hits:x",
                                "ember:v1:s:" + seal + ":entry", "ember:v2:s:{" + seal + "}:entry",
                                "ember:v1:s:{" + seal + "}:chunk:" + std::string(64, 'B'),
                                "ember:v1:n:{" + ns + "}:prefix:short", "ember:v1:n:{" + ns + "}:name:",
                                "ember:v1:n:{" + seal + "}:name:x"})
    EXPECT_FALSE(KeyLayout::parse(bad).has_value()) << bad;
}

TEST(StoreUri, PasswordsInTheUriAreRefusedWithoutBeingEchoed) {
  const std::string err = error_of([] { open_backend("redis://alice:s3cret@127.0.0.1:1"); });
  EXPECT_NE(err.find("EMBER_REDIS_PASSWORD"), std::string::npos) << err;
  EXPECT_EQ(err.find("s3cret"), std::string::npos) << err;
  EXPECT_NE(error_of([] { open_backend("ftp://x"); }).find("store URI"), std::string::npos);
  EXPECT_NE(error_of([] { open_backend("redis://127.0.0.1:99999"); }).find("port"), std::string::npos);
  EXPECT_NE(error_of([] { open_backend("redis://127.0.0.1:1"); }).find("connection"), std::string::npos);
}

}  // namespace
}  // namespace ember::store
