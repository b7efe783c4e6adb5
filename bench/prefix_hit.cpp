// A store prefix hit against the limit it cannot beat: reading the same chunk bytes from the
// same dir: store with plain reads (the page cache warm for both). A hit reads the entry, every
// chunk, verifies the payload and restores it into the engine's cache; the ratio says what the
// verification and the restore cost over the bytes themselves. Also reported: SHA-256 bytes
// per payload byte during the hit (the state is verified once: 1.0), and the hit's time against
// the prefill it replaces. The model is synthetic (qwen2.5-0.5b's KV geometry: 24 layers, 2 KV
// heads, head_dim 64), the prompt P tokens (default 2048), the store a dir: under TMP.
//
//   bench_prefix_hit [P=2048] [threads=2] [repeats=5]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gguf/synth.h"
#include "model/engine.h"
#include "store/prefix.h"
#include "store/store.h"
#include "util/sha256.h"

using namespace ember;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

namespace {

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Every regular file under `dir` read once into memory, as a plain reader of the store would.
uint64_t read_tree(const std::string& dir) {
  uint64_t n = 0;
  std::vector<char> buf(size_t(1) << 20);
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    while (in.read(buf.data(), std::streamsize(buf.size())) || in.gcount() > 0) n += uint64_t(in.gcount());
  }
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  const int P = argc > 1 ? std::atoi(argv[1]) : 2048;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 5;
  if (P < 64 || threads < 1 || repeats < 1) {
    std::fprintf(stderr, "usage: bench_prefix_hit [P>=64] [threads>=1] [repeats>=1]\n");
    return 2;
  }
  const std::string dir = (fs::temp_directory_path() / ("ember-bench-prefix-" + std::to_string(::getpid()))).string();
  fs::create_directories(dir);
  gguf::SynthSpec spec;
  spec.arch = "qwen2";
  spec.layers = 24;
  spec.hidden = 256;
  spec.heads = 4;
  spec.kv_heads = 2;
  spec.ffn = 512;
  spec.vocab = 512;
  spec.qkv_bias = true;
  spec.type = gguf::TensorType::Q8_0;
  spec.seed = 11;
  spec.context = std::max(4096, P + 64);
  gguf::synth_model(gguf::resolve_synth_spec(spec)).write_file(dir + "/m.gguf", true);
  auto model = model::Model::load(dir + "/m.gguf");
  model::Engine engine(model, {threads});
  const std::string tok = sha256_hex("bench-tokenizer");
  std::vector<int32_t> prompt(size_t(P) + 16);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t(1 + (i * 37) % 500);
  const std::vector<int32_t> stored(prompt.begin(), prompt.begin() + P);

  store::Store st = store::Store::open("dir:" + dir + "/store");
  store::StoreRunOptions save;
  save.steps = 1;
  save.save_to = &st;
  save.producer = "bench";
  const auto t_prefill0 = Clock::now();
  store::run_with_store(engine, tok, stored, save);
  const double t_prefill = seconds_since(t_prefill0);

  double t_hit = 1e30, t_plain = 1e30, hashed = 0;
  uint64_t bytes = 0;
  int restored = 0;
  for (int r = 0; r < repeats; ++r) {
    const uint64_t h0 = sha256_bytes_hashed();
    const auto t0 = Clock::now();
    const store::PrefixRestore hit = store::restore_longest_prefix(st, engine, tok, prompt, store::OnBadState::fail);
    t_hit = std::min(t_hit, seconds_since(t0));
    hashed = double(sha256_bytes_hashed() - h0);
    restored = hit.restored;
    const auto t1 = Clock::now();
    bytes = read_tree(dir + "/store");
    t_plain = std::min(t_plain, seconds_since(t1));
  }
  const double payload = 2.0 * 24 * 2 * 64 * 2 * double(P);  // K and V, f16
  std::printf("bench_prefix_hit: P %d (%.1f MiB of K/V), %d threads, best of %d; store dir: (%.1f MiB on disk)\n", P,
              payload / 1048576, threads, repeats, double(bytes) / 1048576);
  std::printf("prefix hit (entry + chunks + verify + restore): %.1f ms = %.2fx a plain read of the store's files "
              "(%.1f ms); restored %d positions\n",
              1e3 * t_hit, t_hit / t_plain, 1e3 * t_plain, restored);
  std::printf("SHA-256 during the hit: %.2f x the payload\n", hashed / payload);
  std::printf("hit / the prefill it replaces (%.2f s): %.4f\n", t_prefill, t_hit / t_prefill);
  fs::remove_all(dir);
  return restored > 0 ? 0 : 1;
}
