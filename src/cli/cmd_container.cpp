// ember kvc pack|unpack|inspect|verify: KVC1 single-file containers (docs/formats/kvc1.md),
// thin over src/kv/kvc1*.h. Also registers the contract and pack commands (cmd_contract.cpp).
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/trust_flags.h"
#include "kv/kvc1.h"
#include "kv/kvc1_snapshot.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/printable.h"

namespace ember::cli {

namespace {

struct KvcArgs {
  std::string in, out, sign;
  bool force = false;
  bool json = false;
};

std::string shape_str(const kv::Kvc1TensorInfo& t) {
  return "[" + std::to_string(t.shape[0]) + "," + std::to_string(t.shape[1]) + "," + std::to_string(t.shape[2]) + "]";
}

nlohmann::json describe(const kv::Kvc1File& f) {
  nlohmann::json j;
  j["path"] = f.path();
  j["file_length"] = f.file_length();
  j["trailer_sha256"] = to_hex(f.trailer());
  j["artifact"] = f.header()["artifact"];
  const auto& s = f.state();
  for (const char* k : {"model", "tokenizer", "geometry", "rope", "representation", "numerics", "resume"})
    if (s.contains(k)) j["state"][k] = s[k];
  if (s.contains("prefix") && s["prefix"].is_object()) {
    j["state"]["prefix"]["sha256"] = s["prefix"].value("sha256", "");
    j["state"]["prefix"]["count"] = s["prefix"].contains("tokens") ? s["prefix"]["tokens"].size() : 0;
  }
  j["tensors"] = nlohmann::json::array();
  for (const auto& t : f.tensors())
    j["tensors"].push_back({{"layer", t.layer}, {"kind", t.is_value ? "V" : "K"},
                            {"dtype", kv::kvc1_dtype_name(t.dtype)}, {"shape", {t.shape[0], t.shape[1], t.shape[2]}},
                            {"offset", t.offset}, {"length", t.length}, {"sha256", to_hex(t.sha256)}});
  return j;
}

void run_pack(const KvcArgs& a) {
  refuse_output_is_input(a.out, {a.in});
  const Digest d = kv::pack_snapshot_dir(a.in, a.out, a.force, a.sign);
  std::printf("packed %s -> %s (trailer sha256 %s)\n", printable(a.in).c_str(), printable(a.out).c_str(),
              to_hex(d).c_str());
}

void run_unpack(const KvcArgs& a) {
  refuse_output_is_input(a.out, {a.in});
  kv::unpack_kvc1(a.in, a.out, a.force);
  std::printf("unpacked %s -> %s\n", printable(a.in).c_str(), printable(a.out).c_str());
}

// A container whose state names payload hashes that its tensors do not reproduce: the
// one state-level failure `kvc inspect` reports too (exit 1). A state that is not an ember
// manifest at all (a container written by another tool) is described, not judged: `kvc verify`
// applies the manifest rules.
std::string state_hash_error(const kv::Kvc1File& f) {
  try {
    kv::kvc1_to_state(f, {kv::Accept::any});
  } catch (const kv::Kvc1Error& e) {
    if (e.code() == kv::Kvc1Reject::state_hash_mismatch) return e.what();
  } catch (const Error&) {
  }
  return {};
}

// Prints what the file says, even when its state is inconsistent (that is what a user inspects),
// then exits 1 naming the failure: a table of a file that does not verify is not a pass.
void run_inspect(const KvcArgs& a) {
  const kv::Kvc1File f = kv::Kvc1File::open(a.in);
  const nlohmann::json j = describe(f);
  const std::string failure = state_hash_error(f);
  if (a.json) {
    std::printf("%s\n", printable_json(j, 2).c_str());
    if (!failure.empty()) throw CheckFailed{failure};
    return;
  }
  // Keys and values of the state come from the file: escaped (util/printable.h).
  std::printf("%s: KVC1 v%u, %llu bytes, artifact %s\n", printable(a.in).c_str(), unsigned(kv::kKvc1Version),
              (unsigned long long)f.file_length(), f.artifact_kind().c_str());
  for (const auto& [k, v] : j["state"].items())
    std::printf("  %-15s %s\n", printable(k).c_str(), printable(printable_json(v)).c_str());
  std::printf("  %-5s %-4s %-5s %-16s %12s %12s  %s\n", "layer", "kind", "dtype", "shape", "offset", "length", "sha256");
  for (const auto& t : f.tensors())
    std::printf("  %-5u %-4s %-5s %-16s %12llu %12llu  %.16s\n", t.layer, t.is_value ? "V" : "K",
                kv::kvc1_dtype_name(t.dtype), shape_str(t).c_str(), (unsigned long long)t.offset,
                (unsigned long long)t.length, to_hex(t.sha256).c_str());
  if (!failure.empty()) throw CheckFailed{failure};
}

void run_verify(const KvcArgs& a) {
  std::string error, code;
  std::string kind;
  try {
    const kv::Kvc1File f = kv::Kvc1File::open(a.in);
    kind = f.artifact_kind();
    kv::kvc1_to_state(f, {kv::Accept::any});  // the manifest rules, its seal and the state hashes
  } catch (const kv::Kvc1Error& e) {
    error = e.what();
    code = kv::kvc1_reject_name(e.code());
  } catch (const Error& e) {
    error = e.what();
  }
  if (a.json) {
    nlohmann::json j = {{"path", a.in}, {"ok", error.empty()}, {"artifact", kind}};
    j["error"] = error.empty() ? nlohmann::json(nullptr) : nlohmann::json(error);
    j["rejection"] = code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code);
    std::printf("%s\n", printable_json(j, 2).c_str());
  } else if (error.empty()) {
    std::printf("%s: ok (KVC1 v%u, %s; structure, tensor hashes, manifest, seal, state hashes and trailer verified)\n",
                printable(a.in).c_str(), unsigned(kv::kKvc1Version), kind.c_str());
  }
  if (!error.empty()) throw CheckFailed{error};
}

}  // namespace

void register_container_commands(CLI::App& app) {
  CLI::App* kvc = app.add_subcommand("kvc", "KVC1 single-file KV containers: pack, unpack, inspect, verify");
  kvc->require_subcommand(1);
  auto a = std::make_shared<KvcArgs>();
  CLI::App* pack = kvc->add_subcommand("pack", "Snapshot or mapped-cache directory -> KVC1 file (verifies it first; the kind is recorded)");
  pack->add_option("snapshot", a->in, "ember.kv-snapshot.v1 or ember.kv-mapped.v1 directory")->required();
  pack->add_option("out", a->out, "KVC1 file to write")->required();
  pack->add_flag("--force", a->force, "Replace an existing file");
  add_sign_flag(pack, a->sign);
  pack->callback([a] { run_pack(*a); });
  CLI::App* unpack = kvc->add_subcommand("unpack", "KVC1 file -> the directory it was packed from (byte-identical; either kind)");
  unpack->add_option("in", a->in, "KVC1 file")->required();
  unpack->add_option("dir", a->out, "Snapshot directory to write")->required();
  unpack->add_flag("--force", a->force, "Replace an existing directory");
  unpack->callback([a] { run_unpack(*a); });
  CLI::App* inspect = kvc->add_subcommand("inspect", "Header summary and tensor table of a verified KVC1 file");
  inspect->add_option("in", a->in, "KVC1 file")->required();
  inspect->add_flag("--json", a->json, "Machine-readable output");
  inspect->callback([a] { run_inspect(*a); });
  CLI::App* verify = kvc->add_subcommand("verify", "Every KVC1 check; exit 1 naming the first failure");
  verify->add_option("in", a->in, "KVC1 file")->required();
  verify->add_flag("--json", a->json, "Machine-readable report");
  verify->callback([a] { run_verify(*a); });
  register_contract_commands(app);
}

}  // namespace ember::cli
