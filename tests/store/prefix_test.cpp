// Prefix reuse through the store, across processes: a prefix stored by one `ember` process
// (kv replay --save-to), restored by another (kv replay --store), gives logits bit-identical
// to a cold `ember run` of the same prompt, on stories260K and on a synthetic qwen2 model; a
// stored state serves every shorter prefix; a corrupt chunk fails the replay naming it, or,
// with --on-bad-state recompute, is reported and recomputed with the same bits.
#include <gtest/gtest.h>

#include "store/redis_server.h"
#include "support/cli_run.h"
#include "support/test_support.h"

namespace ember::test {
namespace {

const std::string kShort = "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
                           "sunshine. One day she saw a big";
const std::string kLong = kShort + " dog in the park and she wanted to pet it";
const std::string kShorter = "Once upon a time, there was a little girl named Lily. She loved to play";

// `ember run` of the prompt: the cold logits of 8 steps.
std::vector<uint8_t> cold_logits(const std::string& model, const std::string& prompt, const std::string& dir) {
  const std::string out = dir + "/cold-" + std::to_string(std::hash<std::string>{}(prompt)) + ".f32";
  const CliRun r = run_ember("run --model " + q(model) + " --prompt " + q(prompt) + " -n 8 --ignore-eos --quiet " +
                             "--dump-logits " + q(out) + " --force");
  EXPECT_EQ(r.rc, 0) << r.out;
  return read_bytes(out);
}

// `ember kv replay --store URI` of the prompt: its logits and what it said.
std::vector<uint8_t> store_logits(const std::string& model, const std::string& uri, const std::string& prompt,
                                  const std::string& dir, const std::string& extra, CliRun* run) {
  const std::string out = dir + "/hit.f32";
  *run = run_ember("kv replay --model " + q(model) + " --store " + q(uri) + " --prompt " + q(prompt) +
                   " -n 8 --ignore-eos --force --logits-out " + q(out) + " " + extra);
  return run->rc == 0 ? read_bytes(out) : std::vector<uint8_t>{};
}

void save_prefix(const std::string& model, const std::string& uri, const std::string& prompt) {
  const CliRun r = run_ember("kv replay --model " + q(model) + " --save-to " + q(uri) + " --prompt " + q(prompt) +
                             " -n 1");
  ASSERT_EQ(r.rc, 0) << r.out;
  ASSERT_NE(r.out.find("saved state"), std::string::npos) << r.out;
}

void check_hits(const std::string& model, const std::string& uri, const std::string& dir,
                const std::vector<std::string>& prompts) {
  for (const std::string& p : prompts) {
    CliRun r;
    const std::vector<uint8_t> hit = store_logits(model, uri, p, dir, "", &r);
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("store hit: restored "), std::string::npos) << r.out;
    const std::vector<uint8_t> cold = cold_logits(model, p, dir);
    ASSERT_FALSE(cold.empty());
    EXPECT_EQ(hit, cold) << "the store hit's logits differ from the cold run's for '" << p << "'";
  }
}

TEST(StorePrefix, AStoredPrefixGivesTheColdLogitsBitForBitOnStories260K) {
  const std::string model = shared_path("models/stories260K.gguf");
  const std::string dir = temp_dir("store-prefix");
  const std::string uri = "dir:" + dir + "/s";
  save_prefix(model, uri, kShort);
  // A longer prompt (the stored prefix + computed rest) and a shorter one (a prefix of it).
  check_hits(model, uri, dir, {kLong, kShorter});
  // The state --save-to stored is the one kv export writes: the same seal.
  const CliRun e = run_ember("kv export --model " + q(model) + " --prompt " + q(kShort) + " -o " + q(dir + "/snap"));
  ASSERT_EQ(e.rc, 0) << e.out;
  const std::string seal = e.out.substr(e.out.find("seal ") + 5, 64);
  const CliRun ls = run_ember("store ls " + q(uri));
  EXPECT_NE(ls.out.find(seal), std::string::npos) << ls.out << " vs " << e.out;
  // ember run --store: the same restore in the generation command, the same bits.
  const CliRun r = run_ember("run --model " + q(model) + " --store " + q(uri) + " --prompt " + q(kLong) +
                             " -n 8 --ignore-eos --quiet --dump-logits " + q(dir + "/run-hit.f32"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("store hit: restored "), std::string::npos) << r.out;
  EXPECT_EQ(read_bytes(dir + "/run-hit.f32"), cold_logits(model, kLong, dir));
  // ember run --save-to stores the same state kv export writes.
  const std::string uri2 = "dir:" + dir + "/s2";
  const CliRun sv = run_ember("run --model " + q(model) + " --save-to " + q(uri2) + " --prompt " + q(kShort) +
                              " -n 4 --quiet");
  ASSERT_EQ(sv.rc, 0) << sv.out;
  EXPECT_NE(sv.out.find("saved state " + seal), std::string::npos) << sv.out;
}

TEST(StorePrefix, AStoredPrefixGivesTheColdLogitsBitForBitOnSyntheticQwen2OverRedis) {
  const std::string dir = temp_dir("store-prefix-qwen2");
  const std::string model = dir + "/qwen2.gguf";
  const CliRun s = run_ember("model synth --arch qwen2 --layers 2 --hidden 64 --heads 4 --kv-heads 2 --ffn 128 "
                             "--vocab 512 --qkv-bias --type q8_0 --seed 15 -o " + q(model));
  ASSERT_EQ(s.rc, 0) << s.out;
  RedisServer server(dir);
  const std::string a = "The quick brown fox jumps over the lazy dog, again and again, all day";
  save_prefix(model, server.uri(), a);
  check_hits(model, server.uri(), dir, {a + " long until the sun goes down.", a.substr(0, 40)});
}

TEST(StorePrefix, ACorruptChunkFailsTheReplayOrIsRecomputedWhenAsked) {
  const std::string model = shared_path("models/stories260K.gguf");
  const std::string dir = temp_dir("store-prefix-bad");
  RedisServer server(dir);
  save_prefix(model, server.uri(), kShort);
  const std::string key = redis_cli(server.port(), "--scan --pattern '*:chunk:*'").substr(0, 148);
  ASSERT_EQ(key.size(), 148u) << key;
  redis_cli(server.port(), "SETRANGE " + q(key) + " 64 XY");
  CliRun r;
  store_logits(model, server.uri(), kLong, dir, "", &r);
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("chunk " + key), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(corrupt)"), std::string::npos) << r.out;
  const std::vector<uint8_t> hit = store_logits(model, server.uri(), kLong, dir, "--on-bad-state recompute", &r);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("stored state refused (recomputing the whole prompt, --on-bad-state recompute)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(key), std::string::npos) << r.out;
  EXPECT_EQ(hit, cold_logits(model, kLong, dir));
  // Evicted (deleted): named as missing.
  redis_cli(server.port(), "DEL " + q(key));
  store_logits(model, server.uri(), kLong, dir, "", &r);
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("found missing (evicted or deleted)"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace ember::test
