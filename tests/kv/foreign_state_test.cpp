// The ember.kv-foreign.v1 kind: sealed and read like the others, never accepted where a native
// (or mapped) state is asked, replayable only with --allow-foreign; and the CLI round trip
// export-llamacpp -> import-llamacpp, whose bytes for stories260K p1 are llama.cpp's own.
#include <gtest/gtest.h>

#include <filesystem>

#include "kv/import.h"
#include "kv/kv_test_util.h"
#include "kv/llamacpp_import.h"
#include "kv/state.h"
#include "model/engine.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace ember::kv {
namespace {

const char* kP1 = "models/llamacpp-state/stories260K.p1.f16.fa0.seq";

struct Loaded {
  std::shared_ptr<const model::Model> model;
  std::unique_ptr<tok::Tokenizer> tok;
  std::unique_ptr<model::Engine> engine;
};

Loaded load_stories() {
  Loaded l;
  l.model = model::Model::load(test::shared_path("models/stories260K.gguf"));
  l.tok = tok::Tokenizer::from_gguf(l.model->file());
  l.engine = std::make_unique<model::Engine>(l.model, model::EngineOptions{1});
  return l;
}

VerifiedState import_p1(Loaded& l) {
  const auto f = MappedFile::open(test::shared_path(kP1));
  return import_llamacpp({f->data(), f->size()}, *l.engine, l.tok->identity(), {}, "p1.seq");
}

TEST(ForeignState, SealedWrittenReadAndRefusedWhereNativeIsAsked) {
  Loaded l = load_stories();
  const VerifiedState s = import_p1(l);
  const std::string dir = test::temp_dir("foreign") + "/p1";
  write_state_dir(s, dir, false);
  const VerifiedState back = open_state(dir, {Accept::foreign});
  EXPECT_EQ(back.cache().k, s.cache().k);
  EXPECT_EQ(back.cache().v, s.cache().v);
  EXPECT_EQ(back.header().foreign()->source_sha256, s.header().foreign()->source_sha256);
  EXPECT_EQ(back.header().foreign()->detail("v_layout"), "transposed");
  EXPECT_EQ(back.manifest().seal, s.manifest().seal);
  const std::string manifest = test::slurp(dir + "/manifest.json");
  EXPECT_NE(manifest.find("\"format\": \"ember.kv-foreign\""), std::string::npos);
  EXPECT_NE(manifest.find("\"engine\": \"llama.cpp\""), std::string::npos);

  const std::string native = test::error_of([&] { open_state(dir); });
  EXPECT_NE(native.find("format: expected ember.kv-snapshot"), std::string::npos) << native;
  EXPECT_NE(native.find("--allow-foreign"), std::string::npos) << native;
  EXPECT_NE(test::error_of([&] { open_state(dir, {Accept::mapped}); }).find("format"), std::string::npos);
  EXPECT_NO_THROW(read_state_dir(dir, {Accept::any, false}));
  const std::string ndir = test::temp_dir("foreign") + "/native";
  write_state_dir(test::make_snapshot(1, 1, 2, 1), ndir, false);
  EXPECT_NE(test::error_of([&] { open_state(ndir, {Accept::foreign}); }).find("expected ember.kv-foreign"),
            std::string::npos);

  // The strict import refuses it (numerics); --allow-foreign skips only the numerics fields.
  const SnapshotManifest target = describe_target(*l.engine, l.tok->identity());
  const std::string strict = test::error_of([&] { import_checked(s, target, 1, "p1"); });
  EXPECT_NE(strict.find("p1: numerics.contract: expected canonical-v1"), std::string::npos) << strict;
  EXPECT_NO_THROW(import_checked(s, target, 1, "p1", /*allow_foreign=*/true));
  SnapshotManifest other = s.manifest();
  other.model.identity = std::string(64, 'a');
  EXPECT_NE(test::error_of([&] { check_compatible(other, target, "p1", true); }).find("model.identity"),
            std::string::npos);
  // The flag changes nothing for a native manifest: its numerics are still compared.
  SnapshotManifest nat = target;
  nat.numerics.engine_fingerprint = "canonical-v1;other";
  nat.prefix = s.manifest().prefix;
  nat.resume = s.manifest().resume;
  nat.geometry.positions = s.manifest().geometry.positions;
  nat.keys = s.manifest().keys;
  nat.values = s.manifest().values;
  EXPECT_NE(test::error_of([&] { check_compatible(nat, target, "n", true); }).find("engine_fingerprint"),
            std::string::npos);

  // Edited manifests, resealed so that only the broken rule can be what is refused.
  auto refused = [&](const std::function<void(ordered_json&)>& fn) {
    const std::string d = test::temp_dir("foreign-edit") + "/x";
    std::filesystem::copy(dir, d);
    test::edit_manifest(d, fn);
    return test::error_of([&] { read_state_dir(d, {Accept::any, false}); });
  };
  EXPECT_NE(refused([](ordered_json& j) { j["numerics"]["contract"] = "canonical-v1"; }).find("numerics.contract"),
            std::string::npos);
  EXPECT_NE(refused([](ordered_json& j) { j["format"] = "ember.kv-snapshot"; }).find("foreign"), std::string::npos);
  EXPECT_NE(refused([](ordered_json& j) { j["foreign"]["conversion"] = "rounded-to-f16"; }).find("foreign.conversion"),
            std::string::npos);
  EXPECT_NE(refused([](ordered_json& j) { j["foreign"]["details"]["k_rotation"] = "hadamard-3"; }).find("foreign.details.k_rotation"),
            std::string::npos);
  EXPECT_NE(refused([](ordered_json& j) { j["foreign"]["extra"] = 1; }).find("extra"), std::string::npos);
  EXPECT_NE(refused([](ordered_json& j) { j["foreign"].erase("source_sha256"); }).find("source_sha256"),
            std::string::npos);
}

TEST(ForeignState, CliImportReplayCompareExportRoundTrip) {
  const std::string dir = test::temp_dir("foreign-cli");
  const std::string ember = test::ember_binary();
  const std::string model = test::shared_path("models/stories260K.gguf");
  std::string out;
  ASSERT_EQ(test::run_command(ember + " kv import-llamacpp " + test::shared_path(kP1) + " --model " + model +
                                  " -o " + dir + "/foreign 2>&1",
                              &out),
            0)
      << out;
  EXPECT_NE(out.find("5 tokens from llama.cpp"), std::string::npos) << out;
  // kv replay refuses it without the flag, naming the flag; continues it with the flag.
  EXPECT_EQ(test::run_command(ember + " kv replay --snapshot " + dir + "/foreign --model " + model + " -n 4 2>&1", &out),
            2);
  EXPECT_NE(out.find("--allow-foreign"), std::string::npos) << out;
  ASSERT_EQ(test::run_command(ember + " kv replay --allow-foreign --snapshot " + dir + "/foreign --model " + model +
                                  " -n 4 2>&1",
                              &out),
            0)
      << out;
  EXPECT_NE(out.find("its numerics are not ember's"), std::string::npos) << out;
  // kv verify refuses it by kind, naming --allow-foreign; with the flag it checks the bytes
  // and seal (and --expect), and says what was not verified.
  EXPECT_EQ(test::run_command(ember + " kv verify " + dir + "/foreign 2>&1", &out), 1);
  EXPECT_NE(out.find("kv verify and kv replay only with --allow-foreign"), std::string::npos) << out;
  ASSERT_EQ(test::run_command(ember + " kv verify --allow-foreign " + dir + "/foreign 2>&1", &out), 0) << out;
  EXPECT_NE(out.find("a foreign cache: K/V computed by llama.cpp (ggsq v3, K f16, V f16, exact): verified are its "
                     "bytes and seal, not ember's numerics"),
            std::string::npos)
      << out;
  const std::string seal_line = out.substr(out.find("seal "), 5 + 64);
  ASSERT_EQ(test::run_command(ember + " kv verify --allow-foreign --json --expect " + seal_line.substr(5) + " " + dir +
                                  "/foreign 2>&1",
                              &out),
            0)
      << out;
  EXPECT_EQ(ordered_json::parse(out)["foreign"]["engine"], "llama.cpp");
  EXPECT_NE(test::run_command(ember + " kv verify --allow-foreign --expect " + std::string(64, '0') + " " + dir +
                                  "/foreign 2>&1",
                              &out),
            0);
  // KVC1 holds the foreign kind too (kind byte 3): pack, unpack byte-identical, and a native
  // reader refuses the .kvc by kind.
  ASSERT_EQ(test::run_command(ember + " kvc pack " + dir + "/foreign " + dir + "/foreign.kvc 2>&1", &out), 0) << out;
  ASSERT_EQ(test::run_command(ember + " kvc unpack " + dir + "/foreign.kvc " + dir + "/unpacked 2>&1", &out), 0) << out;
  for (const char* f : {"/manifest.json", "/keys.f16le", "/values.f16le"})
    EXPECT_EQ(test::read_bytes(dir + "/unpacked" + f), test::read_bytes(dir + "/foreign" + f)) << f;
  EXPECT_EQ(test::run_command(ember + " kv replay --snapshot " + dir + "/foreign.kvc --model " + model + " -n 2 2>&1", &out),
            2);
  EXPECT_NE(out.find("artifact.kind: expected native"), std::string::npos) << out;
  EXPECT_NE(out.find("\"foreign\""), std::string::npos) << out;
  // ember's own export of the same prompt, and the cross-engine compare.
  ASSERT_EQ(test::run_command(ember + " kv export --model " + model + " --prompt-ids 1,403,407,261,378 -o " + dir +
                                  "/native >/dev/null 2>&1"),
            0);
  ASSERT_EQ(test::run_command(ember + " kv compare " + dir + "/native " + dir + "/foreign 2>&1", &out), 0) << out;
  EXPECT_NE(out.find("RIGHT: foreign state"), std::string::npos) << out;
  // Same GGUF, K/V bit-identical here, and still not a same-model comparison: two engines.
  EXPECT_NE(out.find("This comparison crosses engines: LEFT computed by ember, RIGHT by llama.cpp; same model"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("come from the same model"), std::string::npos) << out;
  ASSERT_EQ(test::run_command(ember + " kv compare " + dir + "/foreign " + dir + "/native --json 2>&1", &out), 0)
      << out;
  const ordered_json rep = ordered_json::parse(out);
  EXPECT_EQ(rep["crossing"]["label"], "cross-engine");
  EXPECT_TRUE(rep["crossing"]["crosses_engines"].get<bool>());
  EXPECT_FALSE(rep["crossing"]["crosses_models"].get<bool>());
  // export-llamacpp: for this prompt ember's f16 K/V equal llama.cpp's bit for bit, so the file
  // written is byte-identical to the one llama.cpp wrote (V transposed: flash attention off).
  ASSERT_EQ(test::run_command(ember + " kv export-llamacpp " + dir + "/native -o " + dir + "/p1.seq 2>&1", &out), 0)
      << out;
  EXPECT_EQ(test::read_bytes(dir + "/p1.seq"), test::read_bytes(test::shared_path(kP1)));
  // rows layout, and back: the same K/V bits as the snapshot.
  ASSERT_EQ(test::run_command(ember + " kv export-llamacpp " + dir + "/native --v-layout rows -o " + dir +
                                  "/rows.seq >/dev/null 2>&1"),
            0);
  ASSERT_EQ(test::run_command(ember + " kv import-llamacpp " + dir + "/rows.seq --model " + model + " -o " + dir +
                                  "/back >/dev/null 2>&1"),
            0);
  const VerifiedState a = read_state_dir(dir + "/native", {Accept::any, false});
  const VerifiedState b = read_state_dir(dir + "/back", {Accept::any, false});
  EXPECT_EQ(a.manifest().keys.sha256, b.manifest().keys.sha256);
  EXPECT_EQ(a.manifest().values.sha256, b.manifest().values.sha256);
  EXPECT_EQ(b.header().foreign()->detail("v_layout"), "rows");
  // Nothing is overwritten without --force.
  EXPECT_EQ(test::run_command(ember + " kv export-llamacpp " + dir + "/native -o " + dir + "/p1.seq >/dev/null 2>&1"),
            2);
}

}  // namespace
}  // namespace ember::kv
