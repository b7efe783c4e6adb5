// bench_snapshot: ember.kv-snapshot.v1 costs as ratios to limits measured in the same run.
//   1. export (seal + atomic write with fsync), verify (stream + SHA-256) and import
//      (read + verify + copy into an engine cache) of a 2 x 64 MiB snapshot, each against
//      plain file I/O of the same bytes (write + fsync; read).
//   2. time to first token after restoring a 512- and a 2048-token prefix of a synthetic
//      llama model, against recomputing that prefix with prefill.
// Usage: bench_snapshot [--quick] [--threads N]. Prints one line per measurement.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gguf/synth.h"
#include "kv/import.h"
#include "kv/replay.h"
#include "kv/state.h"
#include "model/engine.h"
#include "model/generate.h"
#include "util/f16.h"
#include "util/sha256.h"

using namespace ember;
namespace fs = std::filesystem;

namespace {

double seconds(const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Median of `reps` runs (after `setup` each time, untimed).
double median_of(int reps, const std::function<void()>& setup, const std::function<void()>& fn) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    if (setup) setup();
    t.push_back(seconds(fn));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void write_plain(const std::string& path, const void* data, size_t n) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const char* p = static_cast<const char*>(data);
  size_t left = n;
  while (left) {
    const ssize_t w = ::write(fd, p, left);
    if (w <= 0) break;
    p += w;
    left -= size_t(w);
  }
  ::fsync(fd);
  ::close(fd);
}

void read_plain(const std::string& path, void* dst, size_t n) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  char* p = static_cast<char*>(dst);
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::read(fd, p + got, n - got);
    if (r <= 0) break;
    got += size_t(r);
  }
  ::close(fd);
}

kv::KvState big_state(int layers, int heads, int dim, int positions) {
  kv::KvState s;
  kv::SnapshotManifest& m = s.manifest;
  m.producer = "bench";
  m.model = {sha256_hex("bench-model"), "llama", 32000, heads * dim * 4, heads * 4};
  m.tokenizer.identity = sha256_hex("bench-tokenizer");
  m.geometry = {layers, heads, dim, positions};
  m.rope.layout = "normal";
  m.rope.theta = 500000.0f;
  m.attention.qk_norm = kv::kQkNormNone;
  m.numerics = {"canonical-v1", "canonical-v1;bench"};
  std::mt19937 rng(1);
  for (int i = 0; i < positions; ++i) m.prefix.tokens.push_back(int32_t(rng() % 32000));
  m.resume = {1, positions, "greedy-argmax"};
  s.cache = model::KvCache(layers, heads, dim, positions);
  s.cache.n_pos = positions;
  for (size_t i = 0; i < s.cache.k.size(); ++i) {
    s.cache.k[i] = f32_to_f16(float(int(rng() % 2001) - 1000) / 500.0f);
    s.cache.v[i] = f32_to_f16(float(int(rng() % 2001) - 1000) / 500.0f);
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  int threads = 1;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) quick = true;
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) threads = std::atoi(argv[++i]);
  }
  const int reps = quick ? 3 : 5;
  const std::string dir = (fs::temp_directory_path() / ("ember-bench-snapshot-" + std::to_string(::getpid()))).string();
  fs::create_directories(dir);

  // ---- 1. throughput of export / verify / import vs plain file I/O ----
  {
    const kv::VerifiedState verified = kv::seal(big_state(16, 8, 128, quick ? 512 : 2048), "bench");
    const kv::KvState& s = verified.state();
    const size_t bytes = s.manifest.keys.bytes;
    const double total_mb = 2.0 * double(bytes) / 1e6;
    const std::string snap = dir + "/snap", plain = dir + "/plain";
    const double t_seal_write = median_of(reps, [&] { fs::remove_all(snap); },
                                          [&] { kv::write_state_dir(verified, snap, true); });
    const double t_seal = median_of(reps, nullptr, [&] {
      kv::KvState again;
      again.manifest = s.manifest;
      again.cache = s.cache.copy();
      kv::seal(std::move(again), "bench");
    });
    const double t_copy_write = median_of(reps, [&] { fs::remove_all(plain); fs::create_directories(plain); }, [&] {
      write_plain(plain + "/k", s.cache.k.data(), bytes);
      write_plain(plain + "/v", s.cache.v.data(), bytes);
    });
    std::vector<uint16_t> sink(bytes / 2);
    const double t_plain_read = median_of(reps, nullptr, [&] {
      read_plain(plain + "/k", sink.data(), bytes);
      read_plain(plain + "/v", sink.data(), bytes);
    });
    const double t_verify = median_of(reps, nullptr, [&] {
      if (!kv::verify_snapshot(snap).ok) std::abort();
    });
    const double t_import = median_of(reps, nullptr, [&] {
      const kv::VerifiedState r = kv::read_state_dir(snap);
      const model::KvCache c = kv::import_checked(r, r.manifest(), 16, "bench");
      if (c.n_pos != r.manifest().geometry.positions) std::abort();
    });
    std::printf("payload: 2 x %.1f MB (16 layers x 8 kv heads x %d positions x 128 dims, f16), page-cache warm\n",
                double(bytes) / 1e6, s.manifest.geometry.positions);
    std::printf("export (seal + atomic write + fsync): %8.1f MB/s = %.2fx plain write+fsync (%.1f MB/s)\n",
                total_mb / (t_seal + t_seal_write), (t_seal + t_seal_write) / t_copy_write, total_mb / t_copy_write);
    std::printf("verify (read + SHA-256, no model):    %8.1f MB/s = %.2fx plain read (%.1f MB/s)\n",
                total_mb / t_verify, t_verify / t_plain_read, total_mb / t_plain_read);
    std::printf("import (read + verify + cache copy):  %8.1f MB/s = %.2fx plain read (%.1f MB/s)\n",
                total_mb / t_import, t_import / t_plain_read, total_mb / t_plain_read);
    std::printf("  (ratios are time / time of the plain operation on the same bytes: 1.00x = as fast as plain I/O)\n");
  }

  // ---- 2. time to first token: restore vs recompute ----
  {
    gguf::SynthSpec spec;
    spec.arch = "llama";
    spec.layers = 4;
    spec.hidden = 256;
    spec.heads = 4;
    spec.kv_heads = 2;
    spec.ffn = 512;
    spec.vocab = 512;
    spec.type = gguf::TensorType::Q8_0;
    spec.seed = 7;
    const std::string model_path = dir + "/model.gguf";
    gguf::synth_model(gguf::resolve_synth_spec(spec)).write_file(model_path, true);
    auto model = model::Model::load(model_path);
    model::Engine engine(model, {threads});
    const std::string tok_id = sha256_hex("bench-tokenizer");
    for (int P : {512, 2048}) {
      std::vector<int32_t> prefix(static_cast<size_t>(P));
      for (int i = 0; i < P; ++i) prefix[size_t(i)] = 1 + (i * 37) % 500;
      const std::string snap = dir + "/ttft" + std::to_string(P);
      kv::ExportResult ex = kv::export_prefix(engine, tok_id, prefix, "bench");
      kv::write_state_dir(ex.snapshot, snap, true);
      int32_t first_recompute = -1, first_restore = -1;
      // Recompute: prefill P tokens, argmax of the boundary logits = the first new token.
      const double t_prefill = median_of(quick ? 1 : 3, nullptr, [&] {
        model::KvCache c = engine.new_cache(P + 1);
        const std::vector<float> logits = engine.forward(c, prefix);
        first_recompute = model::argmax(logits.data(), int(logits.size()));
      });
      // Restore: read + verify + strict import; the first new token is the stored resume
      // token. "+1 step" adds the forward of the resume token (logits for the second token).
      const double t_restore = median_of(reps, nullptr, [&] {
        const kv::VerifiedState r = kv::read_state_dir(snap);
        model::KvCache c = kv::import_for_model(r, engine, tok_id, 1);
        first_restore = r.manifest().resume.token;
      });
      const double t_restore_step = median_of(reps, nullptr, [&] {
        const kv::VerifiedState r = kv::read_state_dir(snap);
        model::KvCache c = kv::import_for_model(r, engine, tok_id, 1);
        const int32_t t = r.manifest().resume.token;
        const std::vector<float> logits = engine.forward(c, std::span<const int32_t>(&t, 1));
        (void)logits;
      });
      if (first_restore != first_recompute) {
        std::printf("ERROR: restored first token %d != recomputed %d\n", first_restore, first_recompute);
        return 1;
      }
      std::printf("TTFT %4d-token prefix (synthetic llama 4x256 q8_0, %d thread%s): restore %.2f ms = %.4fx prefill "
                  "(%.1f ms); restore + 1 decode step %.2f ms = %.4fx\n",
                  P, threads, threads == 1 ? "" : "s", t_restore * 1e3, t_restore / t_prefill, t_prefill * 1e3,
                  t_restore_step * 1e3, t_restore_step / t_prefill);
    }
  }
  fs::remove_all(dir);
  return 0;
}
