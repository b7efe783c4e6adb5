// ember store put | get | ls | rm | verify | gc | stats (docs/store.md). Thin over src/store.
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "cli/model_loader.h"
#include "cli/store_flags.h"
#include "cli/trust_flags.h"
#include "kv/import.h"
#include "kv/state.h"
#include "kv/strict_json.h"
#include "store/store.h"
#include "util/atomic_file.h"
#include "util/ed25519.h"
#include "util/error.h"
#include "util/hex.h"
#include "util/iso_time.h"
#include "util/printable.h"

namespace ember::cli {
namespace {

struct Common {
  std::string uri, password_file;
  bool json = false;
};

CLI::App* add(CLI::App& parent, const char* name, const char* help, Common& c, bool json) {
  CLI::App* s = parent.add_subcommand(name, help);
  s->add_option("uri", c.uri, "dir:PATH | redis://[user@]host:port[/db] | redis+cluster://host:port[,...]")
      ->required();
  add_password_file_flag(s, c.password_file);
  if (json) s->add_flag("--json", c.json, "print canonical JSON");
  return s;
}

store::Store open(const Common& c) { return store::Store::open(c.uri, store_backend_options(c.password_file)); }

void print_removed(const store::GcResult& r) {
  std::printf("removed %zu states, %zu chunks, %zu names, %zu prefix keys, %zu pending markers, %zu temporaries\n",
              r.entries_removed, r.chunks_removed, r.names_removed, r.prefixes_removed, r.pending_removed,
              r.temporaries_removed);
}

// NAME with --model is NAMESPACE/NAME in that model's namespace (store::namespace_of over what
// the model's engine would record), so a user gets back by name what `store put --name` stored
// without copying a hash from `store ls`.
std::string qualified_ref(const std::string& ref, const std::string& model_path, const std::string& tokenizer) {
  if (model_path.empty() || ref.find('/') != std::string::npos || is_hex(ref, 64)) return ref;
  const LoadedModel l = load_model({model_path, tokenizer, ""});
  const model::Engine engine(l.model, {1});
  return store::namespace_of(kv::describe_target(engine, l.tokenizer->identity())) + "/" + ref;
}

void print_warnings(store::Store& s) {
  for (const std::string& w : s.take_warnings()) std::fprintf(stderr, "ember: warning: %s\n", printable(w).c_str());
}

}  // namespace

void register_store_commands(CLI::App& app) {
  CLI::App* st = app.add_subcommand("store", "A shared KV store of sealed snapshots (dir: or Redis)");
  st->require_subcommand(1);

  {
    struct Opts {
      Common c;
      std::string dir, name;
      bool force = false;
      std::string chunk_bytes = std::to_string(store::kDefaultChunkBytes);
    };
    auto o = std::make_shared<Opts>();
    CLI::App* s = add(*st, "put", "Store a snapshot directory (chunks, then the sealed entry)", o->c, false);
    s->add_option("snapshot", o->dir, "snapshot directory (ember.kv-snapshot.v1)")->required();
    s->add_option("--name", o->name, "a name for it in its namespace ([A-Za-z0-9._-]{1,128})");
    s->add_option("--chunk-bytes", o->chunk_bytes, "chunk size (even, 4096 .. 16 MiB)")->capture_default_str();
    s->add_flag("--force", o->force, "point an existing name at this state");
    s->callback([o] {
      // Text, like gc's flags: CLI11 would wrap "-1" into 2^64 - 1 for a size_t.
      const size_t chunk_bytes = size_t(parse_count_flag("--chunk-bytes", "bytes", o->chunk_bytes));
      const kv::VerifiedState snap = open_state_ref(o->dir, {kv::Accept::native});
      store::Store store = open(o->c);
      const store::PutResult r = store.put(snap, {o->name, o->force, chunk_bytes});
      std::printf("%s state %s in namespace %s: %zu chunks, %zu written, %zu new prefix keys\n",
                  r.stored ? "stored" : "already stored", r.seal.c_str(), r.ns.c_str(), r.chunks, r.chunks_written,
                  r.prefix_keys);
      if (!o->name.empty()) std::printf("name %s/%s\n", printable(r.ns).c_str(), printable(o->name).c_str());
      std::printf("seal %s\n", r.seal.c_str());
      const int P = snap.manifest().geometry.positions;
      if (P < store::kPrefixBlock)
        std::fprintf(stderr,
                     "ember: note: %d positions is shorter than one %d-token prefix block: it comes back by "
                     "reference, never as a prefix hit\n",
                     P, store::kPrefixBlock);
    });
  }
  {
    struct Opts {
      Common c;
      std::string ref, output, model, tokenizer;
      bool force = false;
      kv::TrustRequirements trust;
    };
    auto o = std::make_shared<Opts>();
    CLI::App* s = add(*st, "get", "Read a state, verify every chunk and the seal, write a snapshot directory", o->c,
                      false);
    s->add_option("ref", o->ref, "NAMESPACE/NAME or a seal")->required();
    s->add_option("--output,-o", o->output, "snapshot directory to create")->required();
    s->add_option("-m,--model", o->model, "resolve a bare NAME in this GGUF model's namespace (as put named it)");
    s->add_option("--tokenizer", o->tokenizer, "Hugging Face tokenizer.json of --model (default: the GGUF's own)");
    s->add_flag("--force", o->force, "replace an existing directory (atomically)");
    add_trust_flags(s, o->trust);
    s->callback([o] {
      store::Store store = open(o->c);
      kv::VerifiedState snap = store.get_ref(qualified_ref(o->ref, o->model, o->tokenizer));
      const std::string seal = snap.manifest().seal;
      print_warnings(store);
      // --trust KEY: the signature by KEY that any put recorded (store.h signature), when the
      // entry's own manifest carries another signer's or none.
      if (!o->trust.trusted_key_pem.empty()) {
        const std::string key = ed25519_public_key(o->trust.trusted_key_pem);
        const std::optional<Ed25519Signature>& own = snap.manifest().signature;
        if (!own || own->public_key != key)
          if (std::optional<Ed25519Signature> sig = store.signature(seal, key))
            snap = kv::with_signature(std::move(snap), *sig);
      }
      check_artifact_trust(o->c.uri + " " + o->ref, snap.manifest(), o->trust);
      kv::write_state_dir(snap, o->output, o->force);
      std::printf("%s: %d positions, resume token %d, from %s\n", printable(o->output).c_str(),
                  snap.manifest().geometry.positions, int(snap.manifest().resume.token), printable(o->ref).c_str());
      std::printf("seal %s\n", seal.c_str());
    });
  }
  {
    auto o = std::make_shared<Common>();
    CLI::App* s = add(*st, "ls", "List the stored states with their names and hit counts", *o, true);
    s->callback([o] {
      store::Store store = open(*o);
      const store::Catalog c = store.catalog();
      std::map<std::string, std::vector<std::string>> names;
      for (const auto& [k, seal] : c.names) {
        const std::optional<store::ParsedKey> p = store::KeyLayout::parse(k);
        if (p) names[seal].push_back(p->tag + "/" + p->leaf);
      }
      nlohmann::ordered_json arr = nlohmann::ordered_json::array();
      for (const auto& [seal, it] : c.seals) {
        if (!it.has_entry) continue;
        nlohmann::ordered_json j;
        j["seal"] = seal;
        if (it.entry) {
          j["namespace"] = it.entry->ns;
          j["positions"] = it.entry->manifest.geometry.positions;
          j["bytes"] = 2 * it.entry->manifest.payload_bytes();
          j["stored_at"] = it.entry->stored_at;
          j["stored_at_utc"] = iso8601_utc(it.entry->stored_at);
          if (it.hits) {
            j["hits"] = *it.hits;
          } else {  // unknown for this entry only: the rest of the listing stands
            j["hits"] = nullptr;
            std::fprintf(stderr, "ember: warning: hits of %s unknown: %s\n", seal.c_str(),
                         printable(it.hits_error).c_str());
          }
        } else {
          j["error"] = it.entry_error;
        }
        j["names"] = names[seal];
        arr.push_back(j);
      }
      if (o->json) {
        std::fputs(kv::pretty_json(arr).c_str(), stdout);
        return;
      }
      for (const auto& j : arr) {
        // Names come from key names a writer chose: escaped, as verify and --json do.
        std::string n;
        for (const auto& x : j["names"]) n += (n.empty() ? "" : ",") + printable(x.get<std::string>());
        if (j.contains("error")) {
          std::printf("%s INVALID %s\n", j["seal"].get<std::string>().c_str(),
                      printable(j["error"].get<std::string>()).c_str());
          continue;
        }
        const std::string hits = j["hits"].is_null() ? "?" : std::to_string(j["hits"].get<int64_t>());
        std::printf("%s ns %s positions %d bytes %llu stored_at %s hits %s%s%s\n",
                    j["seal"].get<std::string>().c_str(), j["namespace"].get<std::string>().c_str(),
                    j["positions"].get<int>(), static_cast<unsigned long long>(j["bytes"].get<uint64_t>()),
                    j["stored_at_utc"].get<std::string>().c_str(), hits.c_str(), n.empty() ? "" : " names ",
                    n.c_str());
      }
    });
  }
  {
    struct Opts {
      Common c;
      std::string ref;
    };
    auto o = std::make_shared<Opts>();
    CLI::App* s = add(*st, "rm", "Remove a name (and its state when unnamed) or a state by seal", o->c, false);
    s->add_option("ref", o->ref, "NAMESPACE/NAME or a seal")->required();
    s->callback([o] {
      store::Store store = open(o->c);
      print_removed(store.remove(o->ref));
    });
  }
  {
    auto o = std::make_shared<Common>();
    CLI::App* s = add(*st, "verify", "Read every state and check every chunk; list anything dangling", *o, true);
    s->callback([o] {
      store::Store store = open(*o);
      const store::VerifyResult r = store.verify();
      if (o->json) {
        nlohmann::ordered_json j;
        j["result"] = r.ok() ? "ok" : "failed";
        j["states_ok"] = r.entries_ok;
        nlohmann::ordered_json f = nlohmann::ordered_json::array();
        for (const auto& x : r.findings) f.push_back({{"kind", x.what}, {"key", x.key}, {"detail", x.detail}});
        j["findings"] = f;
        std::fputs(kv::pretty_json(j).c_str(), stdout);
      } else {
        for (const auto& x : r.findings)
          std::printf("%s %s: %s\n", x.what.c_str(), printable(x.key).c_str(), printable(x.detail).c_str());
        std::printf("%zu states ok, %zu findings\n", r.entries_ok, r.findings.size());
      }
      if (!r.ok()) throw CheckFailed{"store verify: " + std::to_string(r.findings.size()) + " findings"};
    });
  }
  {
    struct Opts {
      Common c;
      std::string older_than, max_bytes, grace = "900";
    };
    auto o = std::make_shared<Opts>();
    CLI::App* s = add(*st, "gc", "Remove old states, states over a size budget, and what dead puts left", o->c, false);
    // Read as text and parsed by store_flags: CLI11 would take "-1" for an unsigned flag.
    s->add_option("--older-than", o->older_than, "remove states stored more than SECONDS ago");
    s->add_option("--max-bytes", o->max_bytes, "then remove the oldest until the payload bytes fit");
    s->add_option("--grace", o->grace, "chunks and temporaries of a put younger than SECONDS are kept")
        ->capture_default_str();
    s->callback([o] {
      store::GcOptions g;
      if (!o->older_than.empty()) g.older_than_s = int64_t(parse_count_flag("--older-than", "seconds", o->older_than));
      if (!o->max_bytes.empty()) g.max_bytes = parse_count_flag("--max-bytes", "bytes", o->max_bytes);
      g.grace_s = int64_t(parse_count_flag("--grace", "seconds", o->grace));
      store::Store store = open(o->c);
      const store::GcResult r = store.gc(g);
      print_removed(r);
      std::printf("kept %zu states, %llu payload bytes\n", r.entries_kept,
                  static_cast<unsigned long long>(r.bytes_kept));
    });
  }
  {
    auto o = std::make_shared<Common>();
    CLI::App* s = add(*st, "stats", "Counts: states, bytes, chunks, names, prefix keys, hits", *o, true);
    s->callback([o] {
      store::Store store = open(*o);
      const store::StoreStats t = store.stats();
      nlohmann::ordered_json j;
      j["states"] = t.entries;
      j["invalid_states"] = t.invalid_entries;
      j["payload_bytes"] = t.payload_bytes;
      j["chunks"] = t.chunks;
      j["names"] = t.names;
      j["prefix_keys"] = t.prefix_keys;
      j["orphan_groups"] = t.orphan_groups;
      j["hits"] = t.hits;
      if (o->json) {
        std::fputs(kv::pretty_json(j).c_str(), stdout);
      } else {
        for (const auto& [k, v] : j.items()) std::printf("%-14s %s\n", k.c_str(), printable_json(v).c_str());
      }
    });
  }
}

}  // namespace ember::cli
