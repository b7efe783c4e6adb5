// The translator registry as a gate (contract/registry.h): each refusal of
// require_registered by name, the acceptance, and the file's strict, canonical round trip;
// then `map hybrid --registry` end to end on stories260K -> stories260K-kjv-top.
#include <gtest/gtest.h>

#include "contract/registry.h"
#include "support/test_support.h"
#include "util/atomic_file.h"
#include "util/json_strict.h"
#include "util/sha256.h"

namespace ember::contract {
namespace {

using nlohmann::json;

const std::string kSrc = sha256_hex("source"), kTgt = sha256_hex("target"), kTok = sha256_hex("tok"),
                  kMapper = sha256_hex("mapper");

json endpoint(const std::string& id) { return {{"model_identity", id}, {"arch", "llama"}, {"tokenizer_identity", kTok}}; }

// A validated ridge entry whose validated receipt is a file beside the registry.
json entry(const std::string& dir, const std::string& id = "a.ridge", const std::string& status = "validated") {
  const std::string receipt = "{\"a validated bridge receipt\":1}\n";
  write_file_atomic(dir + "/receipt.json", receipt, true);
  return {{"format", "ember.translator-registry.v1"}, {"id", id}, {"source", endpoint(kSrc)}, {"target", endpoint(kTgt)},
          {"kind", "ridge"}, {"mapper_hash", kMapper}, {"status", status},
          {"receipts", {{{"sha256", sha256_hex(receipt)}, {"status", "validated"}, {"path", "receipt.json"}}}}};
}

RegistryQuery query() {
  RegistryQuery q;
  q.source = {kSrc, "llama", kTok, ""};
  q.target = {kTgt, "llama", kTok, ""};
  q.kind = "ridge";
  q.mapper_hash = kMapper;
  return q;
}

std::string write_registry(const std::string& dir, const std::vector<json>& entries) {
  Registry r;
  for (const auto& e : entries) r.add(e, false, "test");
  r.write(dir + "/reg.json", true);
  return dir + "/reg.json";
}

std::string refusal(const std::string& reg, const RegistryQuery& q) {
  return test::error_of([&] { require_registered(reg, q); });
}

TEST(Registry, AcceptsARegisteredValidatedMapper) {
  const std::string dir = test::temp_dir("reg-ok");
  const json e = entry(dir);
  const std::string reg = write_registry(dir, {e});
  const Registration r = require_registered(reg, query());
  EXPECT_EQ(r.id, "a.ridge");
  EXPECT_EQ(r.entry_sha256, sha256_hex(ember::canonical_json(e)));
  EXPECT_EQ(r.label(), "registered a.ridge sha256:" + r.entry_sha256);
}

TEST(Registry, RefusesAnAbsentMapper) {
  const std::string dir = test::temp_dir("reg-absent");
  const std::string reg = write_registry(dir, {entry(dir)});
  RegistryQuery q = query();
  q.mapper_hash = sha256_hex("another mapper");
  EXPECT_NE(refusal(reg, q).find("mapper " + q.mapper_hash + " (kind ridge): expected a registry entry, found none"),
            std::string::npos) << refusal(reg, q);
  q = query();
  q.kind = "affine";  // the same hash registered as another kind is not this translator
  EXPECT_NE(refusal(reg, q).find("expected a registry entry, found none"), std::string::npos);
}

TEST(Registry, RefusesARevokedOrResearchEntry) {
  const std::string dir = test::temp_dir("reg-revoked");
  std::string reg = write_registry(dir, {entry(dir, "a.ridge", "revoked")});
  EXPECT_NE(refusal(reg, query()).find("entry a.ridge: status: expected validated, found revoked"), std::string::npos)
      << refusal(reg, query());
  json research = entry(dir);
  research["status"] = "research";
  research["receipts"][0]["status"] = "research";
  reg = write_registry(dir, {research});
  EXPECT_NE(refusal(reg, query()).find("status: expected validated, found research"), std::string::npos);
}

TEST(Registry, RefusesEvidenceThatDoesNotHashToItsFile) {
  const std::string dir = test::temp_dir("reg-evidence");
  const std::string reg = write_registry(dir, {entry(dir)});
  write_file_atomic(dir + "/receipt.json", "{\"an edited receipt\":2}\n", true);
  const std::string e = refusal(reg, query());
  EXPECT_NE(e.find("entry a.ridge: receipts[0].sha256: expected the SHA-256 of " + dir + "/receipt.json"), std::string::npos) << e;
  std::remove((dir + "/receipt.json").c_str());
  EXPECT_NE(refusal(reg, query()).find("receipts[0].path: expected a regular file to hash, found none"), std::string::npos);
  // A validated entry whose validated receipt names no file cannot be checked: refused.
  json nopath = entry(dir);
  nopath["receipts"][0].erase("path");
  const std::string reg2 = write_registry(test::temp_dir("reg-nopath"), {nopath});
  EXPECT_NE(refusal(reg2, query()).find("expected a validated receipt whose path names its file"), std::string::npos);
}

TEST(Registry, RefusesASourceOrTargetIdentityMismatch) {
  const std::string dir = test::temp_dir("reg-identity");
  const std::string reg = write_registry(dir, {entry(dir)});
  RegistryQuery q = query();
  q.target.model_identity = sha256_hex("another target");
  EXPECT_NE(refusal(reg, q).find("entry a.ridge: target.model_identity: expected " + kTgt + " (the registered target), found " +
                                 q.target.model_identity),
            std::string::npos) << refusal(reg, q);
  q = query();
  q.source.model_identity = sha256_hex("another source");
  EXPECT_NE(refusal(reg, q).find("source.model_identity: expected " + kSrc), std::string::npos);
  q = query();
  q.source.tokenizer_identity = sha256_hex("another tokenizer");
  EXPECT_NE(refusal(reg, q).find("source.tokenizer_identity"), std::string::npos);
}

TEST(Registry, FileIsCanonicalSortedStrictAndAtomic) {
  const std::string dir = test::temp_dir("reg-file");
  const std::string reg = write_registry(dir, {entry(dir, "b.ridge"), entry(dir, "a.ridge")});
  const std::string text = read_file(reg);
  EXPECT_EQ(text, ember::canonical_json(json::parse(text)) + "\n");
  const Registry r = Registry::read(reg);
  ASSERT_EQ(r.entries.size(), 2u);
  EXPECT_EQ(r.entries[0]["id"], "a.ridge");
  EXPECT_EQ(r.text(), text);
  Registry again = r;
  EXPECT_NE(test::error_of([&] { again.add(entry(dir, "a.ridge"), false, "e.json"); }).find("e.json: id: expected an id not yet registered"),
            std::string::npos);
  // Out of order, duplicated, or with an unknown field: refused by the reader.
  json doc = json::parse(text);
  std::swap(doc["entries"][0], doc["entries"][1]);
  write_file_atomic(dir + "/bad.json", doc.dump(), true);
  EXPECT_NE(test::error_of([&] { Registry::read(dir + "/bad.json"); }).find("ascending order"), std::string::npos);
  doc = json::parse(text);
  doc["entries"][0]["trusted"] = true;
  write_file_atomic(dir + "/bad.json", doc.dump(), true);
  EXPECT_NE(test::error_of([&] { Registry::read(dir + "/bad.json"); }).find("invalid registry entry"), std::string::npos);
  write_file_atomic(dir + "/bad.json", "{\"format\":\"ember.translator-registry-file.v1\",\"entries\":[],\"entries\":[]}", true);
  EXPECT_NE(test::error_of([&] { Registry::read(dir + "/bad.json"); }), "");
}

// map hybrid (s = a = 2, no mapper: kind hybrid, mapper_hash null) with --registry: refused
// while absent, then accepted once registered, and the provenance says which.
TEST(Registry, MapHybridIsGatedAndLabelsItsProvenance) {
  const std::string dir = test::temp_dir("reg-cli");
  const std::string ember = test::ember_binary(), src = test::shared_path("models/stories260K.gguf"),
                    tgt = test::shared_path("models/stories260K-kjv-top.gguf");
  const std::string base = ember + " map hybrid --source " + src + " --target " + tgt + " --prompt 'And the LORD said' -n 2 --relation same-base";
  std::string out;
  ASSERT_EQ(test::run_command(base + " --output " + dir + "/plain", &out), 0) << out;
  const json plain = json::parse(read_file(dir + "/plain/manifest.json"));
  EXPECT_EQ(plain["mapping"]["registration"], "unregistered");
  json e = {{"format", "ember.translator-registry.v1"}, {"id", "stories.hybrid"},
            {"source", {{"model_identity", plain["mapping"]["source_model_identity"]}, {"arch", "llama"},
                        {"tokenizer_identity", plain["tokenizer"]["identity"]}}},
            {"target", {{"model_identity", plain["model"]["identity"]}, {"arch", "llama"},
                        {"tokenizer_identity", plain["tokenizer"]["identity"]}}},
            {"kind", "hybrid"}, {"mapper_hash", nullptr}, {"status", "validated"}};
  write_file_atomic(dir + "/receipt.json", "evidence\n", true);
  e["receipts"] = {{{"sha256", sha256_hex(std::string("evidence\n"))}, {"status", "validated"}, {"path", "receipt.json"}}};
  write_file_atomic(dir + "/other.json", "{\"format\":\"ember.translator-registry-file.v1\",\"entries\":[]}\n", true);
  EXPECT_EQ(test::run_command(base + " --registry " + dir + "/other.json --output " + dir + "/refused", &out), 2) << out;
  EXPECT_NE(out.find("expected a registry entry, found none"), std::string::npos) << out;
  EXPECT_FALSE(path_exists(dir + "/refused"));
  write_file_atomic(dir + "/entry.json", e.dump(2), true);
  ASSERT_EQ(test::run_command(ember + " contract registry add " + dir + "/reg.json " + dir + "/entry.json", &out), 0) << out;
  ASSERT_EQ(test::run_command(ember + " contract registry check " + dir + "/reg.json", &out), 0) << out;
  ASSERT_EQ(test::run_command(ember + " contract registry ls " + dir + "/reg.json", &out), 0) << out;
  EXPECT_NE(out.find("stories.hybrid"), std::string::npos) << out;
  ASSERT_EQ(test::run_command(base + " --registry " + dir + "/reg.json --output " + dir + "/gated", &out), 0) << out;
  const json gated = json::parse(read_file(dir + "/gated/manifest.json"));
  EXPECT_EQ(gated["mapping"]["registration"], "registered stories.hybrid sha256:" + sha256_hex(ember::canonical_json(e)));
  // Revoked: refused again.
  e["status"] = "revoked";
  write_file_atomic(dir + "/entry.json", e.dump(2), true);
  ASSERT_EQ(test::run_command(ember + " contract registry add --replace " + dir + "/reg.json " + dir + "/entry.json", &out), 0) << out;
  EXPECT_NE(test::run_command(base + " --registry " + dir + "/reg.json", &out), 0);
  EXPECT_NE(out.find("status: expected validated, found revoked"), std::string::npos) << out;
}

// The shipped example entry (schemas/examples/translator-registry.valid.hybrid.json) is added
// to a registry in another directory: its receipt path, relative to the entry's own file, is
// rewritten relative to the registry's; the entry then gates map hybrid on stories260K ->
// stories260K-kjv-top (its identities are those models'), and the revoked example replaces it.
// Failed before: "receipts[1].path: expected a regular file to hash, found none".
TEST(Registry, TheShippedExampleIsAddedAnywhereAndGates) {
  const std::string dir = test::temp_dir("reg-example");
  const std::string examples = std::string(EMBER_SOURCE_DIR) + "/schemas/examples";
  const std::string ember = test::ember_binary(), reg = dir + "/sub/reg.json";
  std::string out;
  ASSERT_EQ(test::run_command("mkdir -p " + dir + "/sub"), 0);
  ASSERT_EQ(test::run_command(ember + " contract registry add " + reg + " " + examples +
                                  "/translator-registry.valid.hybrid.json", &out), 0) << out;
  EXPECT_NE(out.find("created with entry stories260k-to-kjv-top.hybrid-s2, validated"), std::string::npos) << out;
  const Registry r = Registry::read(reg);
  ASSERT_EQ(r.entries.size(), 1u);
  const std::string path = r.entries[0]["receipts"][1]["path"];
  EXPECT_EQ(path.rfind("../", 0), 0u) << path;  // relative to the registry's directory
  EXPECT_TRUE(check_registry(reg).empty());
  const std::string hybrid = ember + " map hybrid --source " + test::shared_path("models/stories260K.gguf") +
                             " --target " + test::shared_path("models/stories260K-kjv-top.gguf") +
                             " --prompt 'Once upon a time' -n 2 --relation same-base --registry " + reg + " --output ";
  ASSERT_EQ(test::run_command(hybrid + dir + "/gated", &out), 0) << out;
  EXPECT_NE(read_file(dir + "/gated/manifest.json").find("registered stories260k-to-kjv-top.hybrid-s2 sha256:"),
            std::string::npos);
  ASSERT_EQ(test::run_command(ember + " contract registry add --replace " + reg + " " + examples +
                                  "/translator-registry.valid.revoked.json", &out), 0) << out;
  EXPECT_EQ(test::run_command(hybrid + dir + "/refused", &out), 2) << out;
  EXPECT_NE(out.find("status: expected validated, found revoked"), std::string::npos) << out;
}

// `registry add REG --receipt R --id ID` writes the entry of the receipt's translator: its
// endpoints, kind, mapper hash and status, the receipt by hash with a path from the registry.
TEST(Registry, AnEntryIsWrittenFromAReceipt) {
  const std::string dir = test::temp_dir("reg-receipt");
  const std::string ember = test::ember_binary(), src = test::shared_path("models/stories260K.gguf"),
                    tgt = test::shared_path("models/stories260K-kjv-top.gguf");
  std::string out;
  ASSERT_EQ(test::run_command(ember + " map hybrid --source " + src + " --target " + tgt +
                                  " --prompt 'Once upon a time' -n 2 --check --relation same-base --receipt " + dir +
                                  "/r.json", &out), 0) << out;
  const std::string receipt_text = read_file(dir + "/r.json");
  const json receipt = json::parse(receipt_text);
  // A registry in another directory names the receipt from there.
  ASSERT_EQ(test::run_command("mkdir " + dir + "/sub"), 0);
  ASSERT_EQ(test::run_command(ember + " contract registry add " + dir + "/sub/reg.json --receipt " + dir +
                                  "/r.json --id stories.hybrid", &out), 0) << out;
  EXPECT_EQ(Registry::read(dir + "/sub/reg.json").entries.at(0)["receipts"][0]["path"], "../r.json");
  ASSERT_EQ(test::run_command(ember + " contract registry add " + dir + "/reg.json --receipt " + dir +
                                  "/r.json --id stories.hybrid --description 'map hybrid --check'", &out), 0) << out;
  EXPECT_NE(out.find("created with entry stories.hybrid, research"), std::string::npos) << out;
  const json e = Registry::read(dir + "/reg.json").entries.at(0);
  EXPECT_EQ(e["source"], receipt["source"]);
  EXPECT_EQ(e["target"], receipt["target"]);
  EXPECT_EQ(e["kind"], "hybrid");
  EXPECT_TRUE(e["mapper_hash"].is_null());
  EXPECT_EQ(e["status"], "research");  // ember's own receipts claim no more
  EXPECT_EQ(e["description"], "map hybrid --check");
  EXPECT_EQ(e["receipts"], json::array({{{"sha256", sha256_hex(receipt_text)}, {"status", "research"}, {"path", "r.json"}}}));
  EXPECT_TRUE(check_registry(dir + "/reg.json").empty());
  // Refused: an entry and --receipt both or neither, --receipt without --id, a document that is
  // not a bridge receipt.
  EXPECT_EQ(test::run_command(ember + " contract registry add " + dir + "/x.json", &out), 2);
  EXPECT_NE(out.find("expected ENTRY.json or --receipt R.json (one of them), found neither"), std::string::npos) << out;
  EXPECT_EQ(test::run_command(ember + " contract registry add " + dir + "/x.json --receipt " + dir + "/r.json", &out), 2);
  EXPECT_NE(out.find("--id: expected the entry's id with --receipt"), std::string::npos) << out;
  EXPECT_EQ(test::run_command(ember + " contract registry add " + dir + "/x.json --id a --receipt " + dir + "/reg.json", &out), 2);
  EXPECT_NE(out.find("format: expected ember.bridge-receipt.v2 (a bridge receipt), found a translator-registry-file"),
            std::string::npos) << out;
  EXPECT_FALSE(test::run_command("test -e " + dir + "/x.json") == 0);
}

}  // namespace
}  // namespace ember::contract
