// A prefix hit hashes the stored payload once (kv::read_payloads over the chunks; a chunk's own
// SHA-256 is computed only when the payload's fails, to name it) and restores it into the
// engine's cache without another copy, bit-identical to the cold run. Counted with
// sha256_bytes_hashed(), which sees every byte any Sha256 of this process takes.
#include <gtest/gtest.h>

#include "model/engine.h"
#include "model/generate.h"
#include "store/prefix.h"
#include "store/store.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"
#include "util/sha256.h"

namespace ember::store {
namespace {

TEST(PrefixHashOnce, APrefixHitHashesThePayloadOnceAndEqualsTheColdRun) {
  const auto m = model::Model::load(test::shared_path("models/stories260K.gguf"));
  const auto tok = tok::Tokenizer::from_gguf(m->file());
  model::Engine e(m, {1});
  const std::vector<int32_t> stored = tok->encode(
      // Long enough that the manifest (its seal) and the proof's per-block digests are the small
      // fraction left over beside stories260K's narrow rows.
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the sunshine. "
      "Every morning she ran to the park with her brother Tom, and they played with a red ball until lunch. "
      "Their mother made soup and bread, and they ate it under the big tree in the garden.", true);
  std::vector<int32_t> prompt = stored;
  for (int32_t t : tok->encode(" One day she saw a big dog.", false)) prompt.push_back(t);
  ASSERT_GE(stored.size(), size_t(2 * kPrefixBlock));

  Store st = Store::open("dir:" + test::temp_dir("prefix-hash-once") + "/s");
  StoreRunOptions save;
  save.steps = 1;
  save.save_to = &st;
  save.producer = "test";
  const StoreRun saved = run_with_store(e, tok->identity(), stored, save);
  ASSERT_TRUE(saved.saved.stored);

  const uint64_t payload = 2 * uint64_t(2) * e.config().n_layers * e.config().n_kv_heads * stored.size() *
                           e.config().head_dim;  // K and V, f16
  const uint64_t before = sha256_bytes_hashed();
  const PrefixRestore r = restore_longest_prefix(st, e, tok->identity(), prompt, OnBadState::fail);
  const double n = double(sha256_bytes_hashed() - before) / double(payload);
  ASSERT_GT(r.restored, 0) << r.report;
  EXPECT_GE(n, 1.0);
  // The rest is metadata: the manifest's seal (parsed by the lookup and the get, each time with
  // its 70-byte proof entry per 2 KiB layer-block of stories260K's narrow rows) and the 64 bytes
  // of block digests per layer-block; a second pass over the payload would make it >= 2.
  EXPECT_LT(n, 1.3) << "a prefix hit hashed the payload " << n << " times";
  // Restored in place: the cache already has room for the whole prompt.
  EXPECT_GE(r.cache.capacity, int(prompt.size()));

  // And it is the cold run: the restored rows equal a fresh prefill's, bit for bit.
  model::KvCache cold = e.new_cache(int(prompt.size()));
  e.forward(cold, std::span<const int32_t>(prompt.data(), size_t(r.restored)));
  for (int l = 0; l < cold.n_layers; ++l)
    for (int h = 0; h < cold.n_kv_heads; ++h)
      for (int p = 0; p < r.restored; ++p)
        for (int d = 0; d < cold.head_dim; ++d) {
          ASSERT_EQ(r.cache.k_row(l, h, p)[d], cold.k_row(l, h, p)[d]);
          ASSERT_EQ(r.cache.v_row(l, h, p)[d], cold.v_row(l, h, p)[d]);
        }
}

}  // namespace
}  // namespace ember::store
