// Tokenizer throughput: MB/s of encode() on a large mixed-script text (the texts of the shared
// vectors: English, code, Arabic, Persian, Hebrew, CJK, Hindi, Cyrillic, emoji, ...; plus the
// 400 English/KJV prompts), as a ratio to a plain byte scan of the same text in the same run
// (counting UTF-8 characters byte by byte). Also load time as a ratio to reading the file.
// Times are process CPU time. encode() reuses a pre-token's ids when the same pre-token recurs
// within one call (exact: BPE of a piece depends only on its bytes); the text repeats, so
// this measures the steady state of a long prompt, not cold merging.
//
//   bench_tokenize [MiB]   (default 4: the mixed text repeated up to that size)
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "bench_limits.h"
#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"
#include "util/atomic_file.h"

namespace {

// Process CPU time: the work is single-threaded, and the build machine is shared, so CPU time
// is the stable measure (both sides of each ratio are measured the same way).
template <class F>
double median_cpu_time(int reps, F&& fn) {
  return ember::bench::median_time(reps, std::forward<F>(fn), ember::bench::cpu_now_s);
}

std::string shared(const std::string& rel) { return std::string(EMBER_SHARED_DIR) + "/" + rel; }

std::string mixed_text(size_t bytes) {
  std::string unit;
  for (const char* f : {"tokenizer/qwen3/vectors.jsonl", "tokenizer/llama3/vectors.jsonl"}) {
    std::ifstream in(shared(f));
    std::string line;
    while (std::getline(in, line)) unit += nlohmann::json::parse(line)["text"].get<std::string>() + "\n";
  }
  unit += ember::read_file(shared("models/prompts-stories-kjv.txt"));
  std::string text;
  while (text.size() < bytes) text += unit;
  return text;
}

// The limit: one pass over the bytes, counting UTF-8 characters (non-continuation bytes).
size_t count_chars(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 4;
  const std::string text = mixed_text(mib << 20);
  const double mb = double(text.size()) / 1e6;
  volatile size_t sink = 0;
  const double t_scan = median_cpu_time(9, [&] { sink = sink + count_chars(text); });
  std::printf("text: %.2f MB mixed-script; byte scan %.0f MB/s\n", mb, mb / t_scan);

  struct Case {
    const char* name;
    std::string path;
    bool gguf;
  };
  const Case cases[] = {
      {"qwen3 (tokenizer.json)", shared("tokenizer/qwen3/tokenizer.json"), false},
      {"llama3 (tokenizer.json)", shared("tokenizer/llama3/tokenizer.json"), false},
      {"stories260K (GGUF, spm)", shared("models/stories260K.gguf"), true},
  };
  for (const Case& c : cases) {
    std::unique_ptr<ember::tok::Tokenizer> t;
    const double t_load = median_cpu_time(1, [&] {
      t = c.gguf ? ember::tok::Tokenizer::from_gguf(ember::gguf::GgufFile::open(c.path))
                 : ember::tok::Tokenizer::from_json_file(c.path);
    });
    const double t_read = median_cpu_time(3, [&] { sink = sink + count_chars(ember::read_file(c.path)); });
    size_t n_tokens = 0;
    const double t_enc = median_cpu_time(3, [&] { n_tokens = t->encode(text, false).size(); });
    std::printf("%-26s encode %6.1f MB/s = %.4f x byte scan (%zu tokens, %.2f bytes/token); "
                "load %.0f ms = %.0f x reading the file\n",
                c.name, mb / t_enc, t_scan / t_enc, n_tokens, double(text.size()) / double(n_tokens),
                t_load * 1e3, t_load / t_read);
  }
  return 0;
}
