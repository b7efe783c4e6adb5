// KVC1 throughput as ratios to limits measured in the same run:
//   pack    (snapshot dir -> .kvc: hash pass + write pass)  vs  copying the payload files
//   verify  (Kvc1File::open: tensor hashes + trailer hash)  vs  one SHA-256 over the same bytes
//   unpack  (.kvc -> snapshot dir)                          vs  copying the payload files
//
//   bench_kvc1 [layers kv_heads head_dim positions]   (default 16 8 128 512: 32 MiB of K/V)
// Writes to $TMPDIR (or /tmp); removes what it wrote. Built, never run by tests.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>

#include "bench_limits.h"
#include "kv/kvc1_snapshot.h"
#include "util/atomic_file.h"
#include "util/f16.h"
#include "util/mapped_file.h"

namespace {

using ember::kv::KvState;
using ember::bench::best_time;

void copy_file(const std::string& from, const std::string& to) {
  const auto m = ember::MappedFile::open(from);
  ember::AtomicFile out(to, true);
  out.sink().write(m->data(), m->size());
  out.commit();
}

}  // namespace

int main(int argc, char** argv) {
  const int layers = argc > 4 ? std::atoi(argv[1]) : 16, heads = argc > 4 ? std::atoi(argv[2]) : 8;
  const int dim = argc > 4 ? std::atoi(argv[3]) : 128, pos = argc > 4 ? std::atoi(argv[4]) : 512;
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = std::string(tmp ? tmp : "/tmp") + "/bench_kvc1." + std::to_string(::getpid());
  std::filesystem::create_directories(dir);

  KvState st;
  auto& m = st.manifest;
  m.producer = "bench_kvc1";
  m.model = {ember::sha256_hex("bench-model"), "llama", 32000, heads * dim * 4, heads * 4};
  m.tokenizer.identity = ember::sha256_hex("bench-tokenizer");
  m.geometry = {layers, heads, dim, pos};
  m.rope.layout = "normal";
  m.rope.theta = 10000.0f;
  m.attention.qk_norm = ember::kv::kQkNormNone;
  m.numerics.contract = "canonical-v1";
  m.numerics.engine_fingerprint = "canonical-v1;bench";
  for (int i = 0; i < pos; ++i) m.prefix.tokens.push_back(i % 32000);
  m.resume.token = 1;
  m.resume.position = pos;
  st.cache = ember::model::KvCache(layers, heads, dim, pos);
  uint32_t x = 1;
  for (auto* arr : {&st.cache.k, &st.cache.v})
    for (uint16_t& h : *arr) {
      x = x * 1664525u + 1013904223u;
      h = ember::f32_to_f16((float((x >> 8) % 8192u) - 4096.0f) / 1024.0f);
    }
  st.cache.n_pos = pos;
  const ember::kv::VerifiedState s = ember::kv::seal(std::move(st), "bench");
  ember::kv::write_state_dir(s, dir + "/snap", true);
  const double mib = double(s.manifest().keys.bytes + s.manifest().values.bytes) / (1 << 20);

  const double t_copy = best_time(3, [&] {
    copy_file(dir + "/snap/keys.f16le", dir + "/keys.copy");
    copy_file(dir + "/snap/values.f16le", dir + "/values.copy");
  });
  const double t_pack = best_time(3, [&] { ember::kv::pack_snapshot_dir(dir + "/snap", dir + "/s.kvc", true); });
  const double t_hash = best_time(3, [&] {
    const auto f = ember::MappedFile::open(dir + "/s.kvc");
    (void)ember::sha256_hex(f->data(), f->size());
  });
  const double t_verify = best_time(3, [&] { (void)ember::kv::Kvc1File::open(dir + "/s.kvc"); });
  const double t_unpack = best_time(3, [&] { ember::kv::unpack_kvc1(dir + "/s.kvc", dir + "/back", true); });

  std::printf("KVC1, %.1f MiB of K/V (%d layers, %d kv heads, dim %d, %d positions)\n", mib, layers, heads, dim, pos);
  std::printf("  copy payload files  %8.1f MiB/s  (limit)\n", mib / t_copy);
  std::printf("  pack                %8.1f MiB/s  %.2fx the copy\n", mib / t_pack, t_copy / t_pack);
  std::printf("  one SHA-256 pass    %8.1f MiB/s  (limit)\n", mib / t_hash);
  std::printf("  verify (open)       %8.1f MiB/s  %.2fx one hash pass (two hashes by design)\n", mib / t_verify, t_hash / t_verify);
  std::printf("  unpack              %8.1f MiB/s  %.2fx the copy\n", mib / t_unpack, t_copy / t_unpack);
  std::filesystem::remove_all(dir);
  return 0;
}
