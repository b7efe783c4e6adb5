// A state is hashed once: when it is read (or sealed). The readers of every container feed the
// payload through the one payload reader (kv::read_payloads), and what consumes the verified
// state (import, replay) never hashes it again. Counted with sha256_bytes_hashed(), which sees
// every byte any Sha256 of this process takes.
#include <gtest/gtest.h>

#include "kv/import.h"
#include "kv/kv_test_util.h"
#include "kv/kvc1_snapshot.h"
#include "kv/replay.h"
#include "model/engine.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"
#include "util/sha256.h"

namespace ember::test {
namespace {

// SHA-256 bytes spent on `fn`, as a multiple of the state's two payloads (the manifest's own
// few kilobytes, hashed for its seal, are the fraction left over).
template <typename Fn>
double payload_hashes(uint64_t payload_bytes, Fn&& fn) {
  const uint64_t before = sha256_bytes_hashed();
  fn();
  return double(sha256_bytes_hashed() - before) / double(2 * payload_bytes);
}

TEST(HashOnce, ReplayOfADirectoryHashesThePayloadOnce) {
  const auto m = model::Model::load(shared_path("models/stories260K.gguf"));
  const auto tok = tok::Tokenizer::from_gguf(m->file());
  model::Engine e(m, {1});
  // Long enough that the proof's per-block digests (64 bytes a block against stories260K's 1 KiB
  // of K and V rows a layer-block) and the manifest are the small fraction left over.
  const std::vector<int32_t> prompt = tok->encode(
      "Once upon a time there was a little girl. She liked to play in the park with her friends every day. "
      "One day she found a shiny stone under a big tree and took it home to show her mother.", true);
  const kv::ExportResult ex = kv::export_prefix(e, tok->identity(), prompt, "test");
  const std::string dir = temp_dir("hash-once") + "/snap";
  kv::write_state_dir(ex.snapshot, dir, false);
  const uint64_t bytes = ex.snapshot.manifest().payload_bytes();
  kv::ContinueOptions o;
  o.steps = 2;
  const double n = payload_hashes(bytes, [&] {
    const kv::VerifiedState s = kv::open_state(dir);
    kv::replay(s, e, tok->identity(), o);
  });
  EXPECT_GE(n, 1.0);
  EXPECT_LT(n, 1.2) << "payload hashed " << n << " times";
}

TEST(HashOnce, AKvc1FileIsReadInOnePassAndNotHashedAgainByItsConsumer) {
  // KVC1's own integrity digests (the trailer over the file, a SHA-256 per tensor) are part of
  // the format, computed in the container's one verification pass; the state's payload hashes
  // are the third. Nothing after the reader hashes again (an import adds 0).
  const kv::VerifiedState s = make_snapshot(4, 2, 64, 96, 3);
  const std::string path = temp_dir("hash-once-kvc") + "/s.kvc";
  kv::write_state_kvc1(s, path, false);
  const uint64_t bytes = s.manifest().payload_bytes();
  kv::VerifiedState* read = nullptr;
  std::optional<kv::VerifiedState> holder;
  const double n_read = payload_hashes(bytes, [&] { holder.emplace(kv::open_state(path)); });
  read = &*holder;
  EXPECT_GE(n_read, 3.0);
  EXPECT_LT(n_read, 3.2) << "a .kvc read hashed its payload " << n_read << " times";
  const double n_import = payload_hashes(bytes, [&] { kv::import_checked(*read, read->manifest(), 4, "kvc"); });
  EXPECT_EQ(n_import, 0.0);
}

}  // namespace
}  // namespace ember::test
