// ember kv doctor FILE --model M.gguf (docs/formats/llamacpp-state.md, "kv doctor"). Thin over
// kv/doctor.h: read the file and its ember serve sidecar, diagnose, print; exit 0 compatible,
// 1 any other verdict (CheckFailed), 2 unreadable input (Error).
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/limits.h"
#include "cli/model_loader.h"
#include "cli/store_flags.h"
#include "kv/doctor.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json_strict.h"
#include "util/mapped_file.h"
#include "util/sha256.h"

namespace ember::cli {
namespace {

// NAME.ember.json beside a slot file `ember serve` saved (serve/slot_files.h), read strictly.
kv::DoctorSidecar read_sidecar(const std::string& state, const uint8_t* data, size_t size,
                               const std::string& model_identity) {
  kv::DoctorSidecar s;
  const std::string path = state + ".ember.json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return s;
  const nlohmann::json j = parse_json_strict(read_file(path, 1 << 16), path, 4, 64);
  auto field = [&](const char* k) {
    return j.is_object() && j.contains(k) && j.at(k).is_string() ? j.at(k).get<std::string>() : "";
  };
  s.present = true;
  s.model_identity = field("model_identity");
  s.engine = field("engine");
  s.hash_matches = field("state_sha256") == sha256_hex(data, size);
  s.model_matches = s.model_identity == model_identity;
  return s;
}

void add_kv_doctor(CLI::App& kv) {
  struct Opts {
    std::string file, model, tokenizer;
    int threads = 0;
    bool json = false, no_attn_rot = false;
    kv::DoctorOptions o;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* c = kv.add_subcommand(
      "doctor",
      "Diagnose a llama.cpp state or slot file against a GGUF: compatible, wrong model or weight "
      "quantization, corrupt rows, truncated, V layout, past the context (exit 0 compatible, 1 other verdicts)");
  c->add_option("file", o->file,
                "state file (llama_state_seq_save_file, llama-server or ember serve slot save), or a foreign "
                "state directory / .kvc (kv import-llamacpp, kv import-safetensors)")
      ->required();
  c->add_option("--model,-m", o->model, "the GGUF to check the file against")->required();
  c->add_option("--tokenizer", o->tokenizer, "Hugging Face tokenizer.json (default: the GGUF's own)");
  c->add_option("--positions", o->o.positions,
                "positions recomputed (default 0: every one; K: K sampled, the last always)")
      ->check(CLI::Range(0, 1 << 24));
  c->add_option("--next-tokens", o->o.next_tokens, "greedy steps compared with a cold run (default 8)")
      ->check(CLI::Range(0, 4096));
  c->add_option("--cold-limit", o->o.cold_limit,
                "measure the cold run (a prefill of the prefix) up to this many positions (default 4096)")
      ->check(CLI::Range(0, 1 << 24));
  c->add_flag("--no-attn-rot", o->no_attn_rot, "quantized rows are not Hadamard-rotated (LLAMA_ATTN_ROT_DISABLE=1)");
  c->add_flag("--json", o->json, "print the report as JSON");
  add_threads_option(c, o->threads);
  c->callback([o] {
    LoadedModel m = load_model({o->model, o->tokenizer, ""});
    model::Engine engine(m.model, model::EngineOptions{resolve_threads(o->threads), false});
    o->o.attn_rot = !o->no_attn_rot;
    kv::DoctorReport r;
    std::error_code ec;
    if (std::filesystem::is_directory(o->file, ec) || o->file.ends_with(".kvc")) {
      // A foreign state ember already holds (kv import-llamacpp / import-safetensors).
      kv::ReadOptions ro;
      ro.accept = kv::Accept::foreign;
      r = kv::diagnose_foreign_state(open_state_ref(o->file, ro), engine, o->o, o->file);
    } else {
      const auto file = MappedFile::open(o->file);
      const kv::DoctorSidecar sidecar = read_sidecar(o->file, file->data(), file->size(), m.model->identity());
      r = kv::diagnose_llamacpp(std::span<const uint8_t>(file->data(), file->size()), o->file, engine, o->o,
                                sidecar);
    }
    const std::string out = o->json ? pretty_json(kv::doctor_json(r)) + "\n" : kv::doctor_text(r);
    std::fputs(out.c_str(), stdout);
    if (r.exit_code() != 0) throw CheckFailed{};
  });
}

}  // namespace

void register_kv_doctor_command(CLI::App& kv) { add_kv_doctor(kv); }

}  // namespace ember::cli
