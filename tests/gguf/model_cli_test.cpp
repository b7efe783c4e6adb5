// `ember model inspect | quantize | synth` end to end, through the built binary.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "gguf/gguf_file.h"
#include "gguf/writer.h"
#include "util/byte_io.h"
#include "util/atomic_file.h"
#include "util/sha256.h"
#include "support/test_support.h"

namespace ember::gguf {
namespace {

std::string ember(const std::string& args, int* rc = nullptr) {
  std::string out;
  const int status = test::run_command(test::ember_binary() + " " + args, &out);
  if (rc) {
    *rc = status;
  } else {
    EXPECT_EQ(status, 0) << args << "\n" << out;
  }
  return out;
}

TEST(ModelCli, InspectStoriesReportsTheReadmeGeometry) {
  const std::string path = test::shared_path("models/stories260K.gguf");
  const auto j = nlohmann::ordered_json::parse(ember("model inspect " + path + " --json"));
  EXPECT_EQ(j["architecture"], "llama");
  EXPECT_EQ(j["geometry"]["hidden"], 64);
  EXPECT_EQ(j["geometry"]["layers"], 5);
  EXPECT_EQ(j["geometry"]["heads"], 8);
  EXPECT_EQ(j["geometry"]["kv_heads"], 4);
  EXPECT_EQ(j["geometry"]["head_dim"], 8);
  EXPECT_EQ(j["geometry"]["ffn"], 172);
  EXPECT_EQ(j["geometry"]["vocab"], 512);
  EXPECT_EQ(j["rope"]["layout"], "normal");
  EXPECT_EQ(j["rope"]["theta"], 10000.0);
  EXPECT_EQ(j["tokenizer"]["model"], "llama");
  EXPECT_EQ(j["tokenizer"]["size"], 512);
  EXPECT_EQ(j["tensors"].size(), 48u);
  EXPECT_EQ(j["tensors"][0]["name"], "token_embd.weight");
  EXPECT_EQ(j["tensors"][0]["shape"], nlohmann::json::array({64, 512}));
  EXPECT_EQ(j["tensors"][0]["bytes"], 64 * 512 * 4);
  EXPECT_EQ(j["identity"].get<std::string>().size(), 64u);
  // Fixed key order.
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"file", "identity", "gguf_version", "file_size",
                                            "alignment", "architecture", "name", "geometry",
                                            "rope", "rms_eps", "qkv_bias", "qk_norm",
                                            "tied_output", "tokenizer", "file_type",
                                            "tensor_bytes", "tensors"}));
  const std::string text = ember("model inspect " + path);
  EXPECT_NE(text.find("5 layers, hidden 64, 8 heads, 4 kv heads, head dim 8, ffn 172, vocab 512"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("blk.4.ffn_norm.weight"), std::string::npos);
}

TEST(ModelCli, InspectQwen2ReportsNeoxAndBiases) {
  const auto j = nlohmann::json::parse(
      ember("model inspect --json " + test::shared_path("models/synthetic/qwen2-bias-s5006.Q4_K_M.gguf")));
  EXPECT_EQ(j["architecture"], "qwen2");
  EXPECT_EQ(j["rope"]["layout"], "neox");
  EXPECT_EQ(j["rope"]["theta"], 1e6);
  EXPECT_EQ(j["qkv_bias"], true);
  EXPECT_EQ(j["tied_output"], true);
  EXPECT_EQ(j["geometry"]["head_dim"], 64);
  EXPECT_EQ(j["file_type"], 15);
}

TEST(ModelCli, SynthThenInspect) {
  const std::string dir = test::temp_dir("model-cli");
  const std::string out = dir + "/m.gguf";
  const std::string args =
      "model synth --arch qwen3 --layers 2 --hidden 64 --heads 4 --kv-heads 2 --head-dim 32 "
      "--ffn 96 --vocab 300 --qk-norm --tied --type q8_0 --seed 3 -o " + out;
  const std::string made = ember(args);
  EXPECT_NE(made.find("wrote " + out), std::string::npos) << made;
  const auto j = nlohmann::json::parse(ember("model inspect --json " + out));
  EXPECT_EQ(j["architecture"], "qwen3");
  EXPECT_EQ(j["geometry"]["head_dim"], 32);
  EXPECT_EQ(j["qk_norm"], true);
  EXPECT_EQ(j["tokenizer"]["model"], "gpt2");
  EXPECT_EQ(j["tokenizer"]["pre"], "bloom");  // llama.cpp knows it (docs/formats/gguf.md)
  EXPECT_EQ(j["tokenizer"]["size"], 300);
  EXPECT_EQ(j["file_type"], 7);
  // Same flags, same bytes; an existing output needs --force.
  int rc = 0;
  const std::string refused = ember(args, &rc);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(refused.find("already exists"), std::string::npos) << refused;
  const auto before = test::read_bytes(out);
  ember(args + " --force");
  EXPECT_EQ(test::read_bytes(out), before);
  // Bad input: exit 2 and one line saying what was expected.
  const std::string bad = ember(
      "model synth --arch llama --layers 1 --hidden 64 --heads 4 --kv-heads 2 --ffn 64 "
      "--vocab 100 --seed 1 -o " + dir + "/x.gguf", &rc);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(bad.find("--vocab: expected >= 258"), std::string::npos) << bad;
  const std::string bad_type = ember("model quantize " + out + " " + dir + "/y.gguf --type q5_k", &rc);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(bad_type.find("expected q8_0, q4_0, q4_k or q6_k, found 'q5_k'"), std::string::npos);
  const std::string missing = ember("model inspect " + dir + "/nope.gguf", &rc);
  EXPECT_EQ(rc, 2);
}

// Defect 8 (issue 12): a tensor name or metadata string holding ESC sequences reached the
// terminal raw from `model inspect` (clear screen, recolour), and a NUL cut the table's line.
// Checked failing before: the output held the raw ESC bytes and "\x1b" was not found.
TEST(ModelCli, InspectEscapesNamesFromTheFile) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", std::string("evil\x1b]0;pwned\x07\n") + '\0' + "name");
  w.add_tensor(std::string("x\x1b[2J\x1b[H") + '\0' + "y.weight", {4}, TensorType::F32,
               std::vector<uint8_t>(16, 0));
  const std::string path = test::temp_dir("inspect-esc") + "/esc.gguf";
  std::vector<uint8_t> bytes;
  BufferSink sink(bytes);
  w.write(sink);
  write_file_atomic(path, std::string(bytes.begin(), bytes.end()), false);
  const std::string text = ember("model inspect " + path);
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  EXPECT_EQ(text.find('\x07'), std::string::npos) << text;
  EXPECT_EQ(text.find('\0'), std::string::npos) << text;
  EXPECT_NE(text.find("x\\x1b[2J\\x1b[H\\x00y.weight"), std::string::npos) << text;
  EXPECT_NE(text.find("(evil\\x1b]0;pwned\\x07\\x0a\\x00name)"), std::string::npos) << text;
}

// The built-in tokenizer is the one docs/formats/gguf.md describes, as ember's tokenizer
// (a separate module, coordinated only through that document) reads it.
TEST(ModelCli, SynthTokenizerLoadsInEmberTokenize) {
  const std::string out = test::temp_dir("model-cli-tok") + "/m.gguf";
  ember("model synth --arch llama --layers 1 --hidden 32 --heads 2 --kv-heads 1 --ffn 32 "
        "--vocab 400 --seed 9 -o " + out);
  const auto j = nlohmann::json::parse(ember("tokenize --model " + out + " --json --prompt "
                                             "'hello the world'"));
  EXPECT_EQ(j["tokenizer"]["kind"], "bpe:bloom");
  const GgufFile f = GgufFile::open(out);
  const auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  std::vector<std::string> pieces;
  for (const auto& id : j["ids"]) pieces.push_back(tokens.at(id.get<size_t>()));
  EXPECT_EQ(pieces, (std::vector<std::string>{"<|bos|>", "he", "l", "l", "o", "\xc4\xa0the",
                                              "\xc4\xa0w", "o", "r", "l", "d"}));
  EXPECT_EQ(j["ids"][0], f.get_int("tokenizer.ggml.bos_token_id"));
}

// Our quantizer reproduces llama-quantize bit for bit: every tensor that llama.cpp stored in
// the same type as ember has identical bytes (and the fallbacks match too).
TEST(ModelCli, QuantizeMatchesLlamaCppByteForByte) {
  struct Case { const char* in; const char* ref; const char* type; int expect_same; };
  const Case cases[] = {
      {"models/stories260K.gguf", "models/stories260K-Q8_0.gguf", "q8_0", 48},
      {"models/stories260K.gguf", "models/stories260K-Q4_0.gguf", "q4_0", 47},  // output: q8_0
      {"models/synthetic/llama-gqa-s5005.F32.gguf", "models/synthetic/llama-gqa-s5005.Q6_K.gguf",
       "q6_k", 39},
      {"models/synthetic/llama-gqa-s5005.F32.gguf",
       "models/synthetic/llama-gqa-s5005.Q4_K_M.gguf", "q4_k", 34},  // Q4_K_M has 5 q6_K
  };
  const std::string dir = test::temp_dir("quantize");
  for (const Case& c : cases) {
    SCOPED_TRACE(c.ref);
    const std::string out = dir + "/" + c.type + ".gguf";
    ember("model quantize " + test::shared_path(c.in) + " " + out + " --type " + c.type);
    const GgufFile ours = GgufFile::open(out);
    const GgufFile ref = GgufFile::open(test::shared_path(c.ref));
    const GgufFile in = GgufFile::open(test::shared_path(c.in));
    int same = 0;
    for (const TensorInfo& t : ours.tensors()) {
      const TensorInfo& r = ref.tensor(t.name);
      if (t.shape.size() == 1) {
        EXPECT_EQ(t.type, TensorType::F32) << t.name;
      }
      if (t.type != r.type) continue;
      ASSERT_EQ(t.n_bytes, r.n_bytes) << t.name;
      same += std::memcmp(t.data, r.data, t.n_bytes) == 0;
    }
    EXPECT_EQ(same, c.expect_same);
    // Same metadata apart from the file type.
    for (const auto& [k, v] : in.metadata()) {
      if (k == "general.file_type" || k == "general.quantization_version") continue;
      EXPECT_TRUE(ours.has(k)) << k;
    }
    EXPECT_EQ(ours.metadata().size() >= in.metadata().size(), true);
  }
}

// The whole file, not only the tensors: README and docs/formats/gguf.md say the bytes are
// llama-quantize's. Failed before: general.file_type was written before
// general.quantization_version (llama-quantize appends quantization_version, then file_type),
// and the tensors kept the input's order (llama-quantize sorts them by layer, then name).
TEST(ModelCli, QuantizeQ8_0IsTheSameFileAsLlamaQuantize) {
  const std::string out = test::temp_dir("quantize-file") + "/q8_0.gguf";
  ember("model quantize " + test::shared_path("models/stories260K.gguf") + " " + out + " --type q8_0");
  EXPECT_EQ(sha256_file_hex(out), sha256_file_hex(test::shared_path("models/stories260K-Q8_0.gguf")));
  // And where every matrix is Q6_K (the tensor order is llama-quantize's too).
  const std::string q6 = test::temp_dir("quantize-file") + "/q6_k.gguf";
  ember("model quantize " + test::shared_path("models/synthetic/llama-gqa-s5005.F32.gguf") + " " + q6 +
        " --type q6_k");
  EXPECT_EQ(sha256_file_hex(q6), sha256_file_hex(test::shared_path("models/synthetic/llama-gqa-s5005.Q6_K.gguf")));
  // Requantizing a quantized file: the two keys move to the end, as llama-quantize's
  // gguf_set_val (remove, then append) moves them.
  const std::string again = test::temp_dir("quantize-file") + "/q8_0-again.gguf";
  ember("model quantize " + out + " " + again + " --type q8_0");
  const GgufFile f = GgufFile::open(again);
  const auto& kv = f.metadata();
  ASSERT_GE(kv.size(), 2u);
  EXPECT_EQ(kv[kv.size() - 2].first, "general.quantization_version");
  EXPECT_EQ(kv[kv.size() - 1].first, "general.file_type");
}

}  // namespace
}  // namespace ember::gguf
