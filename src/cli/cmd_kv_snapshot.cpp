// ember kv export | verify | replay | validate-replay (docs/formats/kv-snapshot-v1.md).
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "kv/snapshot.h"
#include "kv/strict_json.h"

namespace ember::cli {
namespace {

void add_verify(CLI::App& kv) {
  struct Opts {
    std::string dir;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* c = kv.add_subcommand("verify", "Check a snapshot's format, sizes, hashes and consistency (no model needed)");
  c->add_option("dir", o->dir, "snapshot directory")->required();
  c->add_flag("--json", o->json, "print the report as canonical JSON");
  c->callback([o] {
    const kv::VerifyReport r = kv::verify_snapshot(o->dir);
    if (o->json) {
      std::fputs(kv::canonical_json(r.to_json()).c_str(), stdout);
    } else {
      for (const auto& ch : r.checks)
        std::printf("%-22s %s%s%s\n", ch.name.c_str(), ch.status.c_str(), ch.detail.empty() ? "" : ": ",
                    ch.detail.c_str());
      if (r.ok)
        std::printf("%s: ok (%d positions, resume token %d at position %lld)\n", o->dir.c_str(),
                    r.manifest.geometry.positions, int(r.manifest.resume.token),
                    static_cast<long long>(r.manifest.resume.position));
    }
    if (!r.ok) throw CheckFailed{"verify failed: " + r.error};
  });
}

}  // namespace

void register_kv_snapshot_commands(CLI::App& kv) { add_verify(kv); }

}  // namespace ember::cli
