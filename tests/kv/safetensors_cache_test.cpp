// Safetensors KV caches (kv/safetensors_cache.h): the mlx-lm and vLLM layouts round-trip K/V
// bits (F16) and values (F32), keys are in Hugging Face order for llama, layout errors are
// refused naming the tensor, and a foreign cache of stories260K imports into a snapshot equal
// to ember's own export, while a wrong prefix or model is refused by the recomputed row.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "kv/import.h"
#include "kv/kv_test_util.h"
#include "kv/replay.h"
#include "kv/safetensors_cache.h"
#include "model/engine.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/f16.h"
#include "util/sha256.h"

namespace ember::kv {
namespace {

namespace st = ember::safetensors;

void expect_same_rows(const model::KvCache& a, const model::KvCache& b) {
  ASSERT_EQ(a.n_pos, b.n_pos);
  for (int l = 0; l < a.n_layers; ++l)
    for (int h = 0; h < a.n_kv_heads; ++h)
      for (int p = 0; p < a.n_pos; ++p) {
        ASSERT_EQ(0, std::memcmp(a.k_row(l, h, p), b.k_row(l, h, p), size_t(a.head_dim) * 2)) << l << " " << h << " " << p;
        ASSERT_EQ(0, std::memcmp(a.v_row(l, h, p), b.v_row(l, h, p), size_t(a.head_dim) * 2));
      }
}

TEST(SafetensorsCache, MlxAndVllmRoundTripBits) {
  const KvState s = test::make_state(3, 2, 8, 5, 7, 9);  // capacity 9 > 5 positions
  const std::string dir = test::temp_dir("stc");
  for (const char* rope : {"neox", "normal"})
    for (auto layout : {SafetensorsLayout::mlx, SafetensorsLayout::vllm})
      for (auto dtype : {st::Dtype::f16, st::Dtype::f32}) {
        const std::string p = dir + "/" + rope + std::to_string(int(layout)) + st::dtype_name(dtype);
        write_safetensors_cache(s.cache, rope, layout, dtype, {{"note", "t"}}, p, false);
        const ForeignCache f = read_safetensors_cache(p, layout, s.manifest.geometry, rope);
        EXPECT_EQ(f.source_dtype, st::dtype_name(dtype));
        expect_same_rows(s.cache, f.cache);
      }
  // The file holds keys in Hugging Face order: for llama (normal), HF[j] = ember[2j] and
  // HF[d/2 + j] = ember[2j + 1]; values as they are.
  write_safetensors_cache(s.cache, "normal", SafetensorsLayout::mlx, st::Dtype::f16, {}, dir + "/n.st", false);
  write_safetensors_cache(s.cache, "neox", SafetensorsLayout::mlx, st::Dtype::f16, {}, dir + "/x.st", false);
  const st::File n = st::File::open(dir + "/n.st"), x = st::File::open(dir + "/x.st");
  const uint16_t* kn = reinterpret_cast<const uint16_t*>(n.bytes(*n.header().find("0.0")).data());
  const uint16_t* kx = reinterpret_cast<const uint16_t*>(x.bytes(*x.header().find("0.0")).data());
  for (int j = 0; j < 4; ++j) {
    EXPECT_EQ(kn[j], s.cache.k_row(0, 0, 0)[2 * j]);
    EXPECT_EQ(kn[4 + j], s.cache.k_row(0, 0, 0)[2 * j + 1]);
  }
  EXPECT_EQ(0, std::memcmp(kx, s.cache.k_row(0, 0, 0), 16));
  EXPECT_EQ(n.header().metadata.at("2.2"), "KVCache");
  // BF16 is rounded: every value within bf16's half ulp of the f16 one.
  write_safetensors_cache(s.cache, "neox", SafetensorsLayout::mlx, st::Dtype::bf16, {}, dir + "/b.st", false);
  const ForeignCache b = read_safetensors_cache(dir + "/b.st", SafetensorsLayout::mlx, s.manifest.geometry, "neox");
  for (size_t i = 0; i < 8; ++i) {
    const float want = f16_to_f32(s.cache.k[i]), got = f16_to_f32(b.cache.k[i]);
    EXPECT_LE(std::fabs(got - want), std::fabs(want) / 128 + 1e-6f);
  }
}

TEST(SafetensorsCache, LayoutErrorsNameTheTensor) {
  const KvState s = test::make_state(2, 2, 4, 3);
  const Geometry& g = s.manifest.geometry;
  const std::string dir = test::temp_dir("stcbad");
  auto half = [](ByteSink& o, size_t n, uint16_t v) { for (size_t i = 0; i < n; ++i) o.write_le<uint16_t>(v); };
  auto mlx_file = [&](const std::string& name, std::vector<st::OutTensor> ts, std::map<std::string, std::string> md = {}) {
    st::write_file(dir + "/" + name, ts, md, false);
    return test::error_of([&] { read_safetensors_cache(dir + "/" + name, SafetensorsLayout::mlx, g, "neox"); });
  };
  auto t = [&](const std::string& n, std::vector<uint64_t> shape, st::Dtype d = st::Dtype::f16, uint16_t v = 0x3c00) {
    uint64_t count = 1;
    for (auto x : shape) count *= x;
    const size_t bytes = size_t(count) * st::dtype_size(d);
    return st::OutTensor{n, d, shape, [=](ByteSink& o) { half(o, bytes / 2, v); }};
  };
  const std::vector<uint64_t> ok{1, 2, 3, 4};
  EXPECT_NE(mlx_file("missing", {t("0.0", ok), t("0.1", ok), t("1.0", ok)}).find("tensor \"1.1\": expected present"),
            std::string::npos);
  EXPECT_NE(mlx_file("extra", {t("0.0", ok), t("0.1", ok), t("1.0", ok), t("1.1", ok), t("2.0", ok)}).find("tensor \"2.0\""),
            std::string::npos);
  EXPECT_NE(mlx_file("shape", {t("0.0", ok), t("0.1", {1, 2, 3, 5}), t("1.0", ok), t("1.1", ok)}).find("tensor \"0.1\".shape"),
            std::string::npos);
  EXPECT_NE(mlx_file("dtype", {t("0.0", ok), t("0.1", ok, st::Dtype::i16), t("1.0", ok), t("1.1", ok)}).find("tensor \"0.1\".dtype: expected F16|BF16|F32"),
            std::string::npos);
  EXPECT_NE(mlx_file("mixed", {t("0.0", ok), t("0.1", ok, st::Dtype::bf16), t("1.0", ok), t("1.1", ok)}).find("(as the first tensor)"),
            std::string::npos);
  EXPECT_NE(mlx_file("inf", {t("0.0", ok), t("0.1", ok), t("1.0", ok, st::Dtype::f16, 0x7c00), t("1.1", ok)}).find("Inf at kv_head 0"),
            std::string::npos);
  EXPECT_NE(mlx_file("class", {t("0.0", ok), t("0.1", ok), t("1.0", ok), t("1.1", ok)}, {{"2.1", "RotatingKVCache"}})
                .find("__metadata__.2.1: expected \"KVCache\""),
            std::string::npos);
  // vllm: a stray entry in the directory, and a file with the wrong tensor.
  write_safetensors_cache(s.cache, "neox", SafetensorsLayout::vllm, st::Dtype::f16, {}, dir + "/v", false);
  test::spit(dir + "/v/notes.txt", "x");
  EXPECT_NE(test::error_of([&] { read_safetensors_cache(dir + "/v", SafetensorsLayout::vllm, g, "neox"); }).find("entry \"notes.txt\""),
            std::string::npos);
  std::filesystem::remove(dir + "/v/notes.txt");
  std::filesystem::remove(dir + "/v/model.layers.1.self_attn.attn.safetensors");
  st::write_file(dir + "/v/model.layers.1.self_attn.attn.safetensors", {t("kv", {2, 3, 8})}, {}, false);
  EXPECT_NE(test::error_of([&] { read_safetensors_cache(dir + "/v", SafetensorsLayout::vllm, g, "neox"); }).find("exactly one, \"kv_cache\""),
            std::string::npos);
}

// A cache another runtime wrote imports as a foreign state, whatever its bytes: here they are
// ember's own rows (so the payload hashes equal a native export's), and it is still foreign.
TEST(SafetensorsCache, ForeignCacheOfStoriesImportsAsAForeignState) {
  auto m = model::Model::load(test::shared_path("models/stories260K.gguf"));
  auto tok = tok::Tokenizer::from_gguf(m->file());
  model::Engine engine(m, {1});
  const std::vector<int32_t> prompt = tok->encode("Once upon a time", true);
  const ExportResult mine = export_prefix(engine, tok->identity(), prompt, "test");
  const std::string dir = test::temp_dir("stcimp");
  for (auto dtype : {st::Dtype::f16, st::Dtype::f32}) {
    const std::string p = dir + "/" + st::dtype_name(dtype);
    write_safetensors_cache(mine.snapshot.cache(), "normal", SafetensorsLayout::mlx, dtype, {}, p, false);
    ForeignCache f = read_safetensors_cache(p, SafetensorsLayout::mlx, mine.snapshot.manifest().geometry, "normal");
    const ForeignImport r = import_foreign(engine, tok->identity(), prompt, std::move(f), {kModelCheckPositions, true, "test", "torch"}, p);
    EXPECT_EQ(r.snapshot.manifest().keys.sha256, mine.snapshot.manifest().keys.sha256);
    EXPECT_EQ(r.snapshot.manifest().values.sha256, mine.snapshot.manifest().values.sha256);
    EXPECT_EQ(r.snapshot.manifest().resume.token, mine.snapshot.manifest().resume.token);
    // ember's own rows, recomputed bit for bit.
    EXPECT_EQ(r.check.k.all.error, 0.0);
    EXPECT_EQ(r.check.v.all.error, 0.0);
    EXPECT_EQ(r.check.positions.size(), size_t(kModelCheckPositions));
    EXPECT_NE(r.snapshot.manifest().producer.find("model check passed (4 positions"), std::string::npos);
    ASSERT_EQ(r.snapshot.kind(), StateKind::foreign);
    const ForeignProvenance& fp = *r.snapshot.header().foreign();
    EXPECT_EQ(fp.engine, "torch");
    EXPECT_EQ(fp.format, "safetensors-mlx");
    EXPECT_EQ(fp.cache_type_k, dtype == st::Dtype::f16 ? "f16" : "f32");
    EXPECT_EQ(fp.conversion, dtype == st::Dtype::f16 ? "exact" : "rounded-to-f16");
    EXPECT_EQ(fp.source_sha256, sha256_file_hex(p));
    EXPECT_EQ(r.snapshot.manifest().numerics.contract, kForeignContract);
    // Like every foreign cache: refused by the strict import, accepted with allow_foreign.
    const std::string strict = test::error_of([&] { import_for_model(r.snapshot, engine, tok->identity(), 1, "st"); });
    EXPECT_NE(strict.find("st: numerics.contract: expected canonical-v1"), std::string::npos) << strict;
    EXPECT_NO_THROW(import_for_model(r.snapshot, engine, tok->identity(), 1, "st", /*allow_foreign=*/true));
  }
  const std::string p = dir + "/F16";
  // The wrong key order (as if the file were neox), a different prefix, a wrong length.
  const Geometry& g = mine.snapshot.manifest().geometry;
  std::string e = test::error_of([&] {
    import_foreign(engine, tok->identity(), prompt, read_safetensors_cache(p, SafetensorsLayout::mlx, g, "neox"), {kModelCheckPositions, true, "t", ""}, p);
  });
  EXPECT_NE(e.find("model check: expected keys of layer 0 within 5e-05"), std::string::npos) << e;
  std::vector<int32_t> other = prompt;
  other.back() = 403;
  e = test::error_of([&] {
    import_foreign(engine, tok->identity(), other, read_safetensors_cache(p, SafetensorsLayout::mlx, g, "normal"), {kModelCheckPositions, true, "t", ""}, p);
  });
  EXPECT_NE(e.find("position 4 ("), std::string::npos) << e;
  EXPECT_NE(e.find("another weight quantization, model, token or position computed this cache"), std::string::npos) << e;
  other.pop_back();
  e = test::error_of([&] {
    import_foreign(engine, tok->identity(), other, read_safetensors_cache(p, SafetensorsLayout::mlx, g, "normal"), {kModelCheckPositions, true, "t", ""}, p);
  });
  EXPECT_NE(e.find("prefix: expected 5 tokens (the positions the file holds), found 4"), std::string::npos) << e;
}

}  // namespace
}  // namespace ember::kv
