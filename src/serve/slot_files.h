#pragma once
// llama-server's slot persistence, POST /slots/{id}?action=save|restore|erase with
// {"filename": NAME}: files in --slot-save-path in llama.cpp's sequence-state format (`ggsq`
// v3, what `kv export-llamacpp` writes and llama_state_seq_load_file loads).
//
// A restore must keep the server's contract (a restored prefix is the cold run's rows), so a
// state is restored only when this engine computed it for this model: save writes NAME and
// NAME.ember.json beside it (the SHA-256 of NAME's bytes, the model identity and the engine
// fingerprint), and restore refuses a file whose sidecar is missing or disagrees. A cache that
// llama.cpp computed is foreign: `ember kv import-llamacpp` makes it a foreign state.
// Names are names only: [A-Za-z0-9._-], no leading dot, at most 200 bytes.
#include <string>

#include <nlohmann/json.hpp>

#include "kv/llamacpp_state.h"
#include "serve/scheduler.h"

namespace ember::serve {

struct SlotFiles {
  std::string dir;  // --slot-save-path ("": slot files are off)
  std::string model_identity;
  std::string engine;
  kv::LlamaCppTarget target;
};

// Runs one action and returns llama-server's response object; ApiError on a bad request (400),
// a missing file (404) or no --slot-save-path (501).
nlohmann::json slot_action(const SlotFiles& files, Scheduler& scheduler, int id, const std::string& action,
                           const std::string& body);

}  // namespace ember::serve
