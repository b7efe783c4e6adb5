#pragma once
// `ember kv matrix` as a library: the exact-replay matrix of seed 000 (models x weight types x
// prompts x thread/SIMD variants), one cell at a time, in one process (docs/matrix.md).
//
// Each cell runs, on one model, one prompt and one variant:
//   1. native   generate_native (kv/replay.h): N greedy steps, logits [N][V] kept
//   2. export   export_prefix -> write_state_dir (CELL/snapshot) -> open_state: the state goes
//               through the one writer and the one verifying reader, not a memory copy
//   3. replay   replay (strict import) of the loaded snapshot: N-1 steps from the resume token
//   4. gate     compare_replay_logits: native[N,V] == concat(boundary[1,V], replay[N-1,V]),
//               f32 bit for bit; native's first selected token must be the resume token at
//               position P (the off-by-one the gate makes visible)
//   5. self     compare_states(snapshot, snapshot): every metric exact (no bit mismatch,
//               cosine 1, MSE 0, max |d| 0, R^2 1 where defined)
//   6. control  a receipted perturbation (make_receipt / apply_perturbation: zero K and V of
//               one layer and head) must be DETECTED: compare_states localizes it to exactly
//               that (layer, head), and the same-input diagnostics (run_diagnostics) show the
//               logits after the resume token differ, i.e. a replay of the edited cache would
//               fail the gate. A control that goes undetected fails the cell.
// Each role (native, export, replay) runs on its own engine with its own thread count and
// SIMD path (util/simd.h set_simd_override): canonical-v1 promises the same bits for all.
// A variant forcing a path this CPU lacks is skipped, and the cell says so.
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kv/replay_gate.h"
#include "kv/state.h"
#include "model/engine.h"
#include "util/html_report.h"
#include "util/simd.h"

namespace ember::analysis {

// The roles of a cell, in the order a variant names them.
inline constexpr std::array<const char*, 3> kMatrixRoles = {"native", "export", "replay"};

// One thread/SIMD variant (docs/matrix.md, "variants"):
//   VARIANTS := VARIANT (';' VARIANT)*      VARIANT := ITEM (',' ITEM)*
//   ITEM     := 't' N ['-' N ['-' N]]        threads of native, export, replay (1..256)
//             | 'simd=' P ['/' P ['/' P]]    P: scalar | avx2 | avx512 | avx512vnni | default
// Roles left out repeat the last one given ("t1-2" = native 1, export 2, replay 2). Without a
// t item every role gets the matrix's thread count; without simd, the default path (the
// process's own: EMBER_SIMD if set, else the CPU's best).
struct MatrixVariant {
  std::string spec;                                  // as written (trimmed)
  std::array<int, 3> threads{0, 0, 0};               // 0: the matrix's default
  std::array<std::optional<SimdLevel>, 3> simd{};    // nullopt: the default path
  // The paths this variant forces above `best` (this CPU's), in role order, without repeats.
  std::vector<std::string> missing_paths(SimdLevel best = detect_simd()) const;
};

// Error naming "--variants", the variant (1-based) and the item on anything else; at most 64
// variants, none repeated.
std::vector<MatrixVariant> parse_variants(const std::string& spec);
// The script's five variants (scripts/replay-matrix.sh before issue 18).
inline constexpr const char* kDefaultVariants =
    "t1;t1-2-3;t2,simd=default/default/scalar;t1,simd=scalar/scalar/default;t2,simd=avx2/avx512/avx2";

struct MatrixPrompt {
  std::string id;               // the JSONL id, or the 1-based line of a plain prompt file
  std::vector<int32_t> tokens;  // as the model's tokenizer encodes it
};

// What the caller's loader returns for one model path.
struct MatrixModel {
  std::shared_ptr<const model::Model> model;
  std::string tokenizer_identity;
  std::vector<MatrixPrompt> prompts;
};

struct MatrixOptions {
  int steps = 24;            // N: native rows (>= 2); replay runs N - 1
  int threads = 1;           // a role's thread count when its variant names none (>= 1)
  int control_layer = 0, control_head = 0;  // the zeroing control's (layer, KV head)
  int control_steps = 2;     // same-input diagnostic steps of the control (>= 1)
  bool allow_past_context = false;
  std::string out;           // directory of the cells (OUT/cells/NAME); must exist
  bool keep = false;         // keep each cell's snapshot, logits and control receipt
  std::string producer = "ember 0.1.0";
  // The best path a variant may force; nullopt: detect_simd(). Tests lower it to see a skip.
  std::optional<SimdLevel> simd_ceiling;
  // Tests only: called with the cell's snapshot directory after the export wrote it and before
  // it is read back for the replay (to corrupt a cell on disk).
  std::function<void(const std::string&)> before_replay;
};

struct MatrixGate {
  bool pass = false;
  int prefix = 0;             // P
  int32_t resume_token = -1;  // at position P
  int64_t resume_position = 0;
  int32_t native_first = -1;  // native's first selected token (== resume_token when aligned)
  kv::GateVerdict verdict;
};

struct MatrixSelf {
  bool exact = false;
  uint64_t mismatches = 0;   // f16 bit mismatches over every (layer, head, part)
  double min_cosine = 0, max_mse = 0, max_abs = 0;
  std::optional<double> min_r2;  // over the heads where R^2 is defined
};

struct MatrixControl {
  bool detected = false;
  std::string operation;               // "zero layer 0 head 0 part kv"
  std::string receipt_sha256;          // of the canonical receipt JSON
  uint64_t changed_k = 0, changed_v = 0;  // receipt: elements whose bits change
  uint64_t mismatches_at_target = 0;   // compare: mismatches at (layer, head)
  uint64_t mismatches_elsewhere = 0;   // compare: mismatches anywhere else (must be 0)
  double cosine_k = 1, cosine_v = 1;   // compare at (layer, head)
  double logits_max_abs = 0;           // diagnostics step 0 (the gate's first replay row)
  std::optional<double> logits_kl;     // KL(native || edited) at step 0
  int top1_agreement = 0, steps = 0;
};

struct MatrixCell {
  int model_index = 0, prompt_index = 0, variant_index = 0;  // 0-based
  std::string model_path, model_name, architecture, weights, model_identity;
  std::string prompt_id;
  int prompt_tokens = 0;
  std::string variant;                       // the spec
  std::array<int, 3> threads{0, 0, 0};       // as run
  std::array<std::string, 3> simd;           // path names as run
  std::string status;                        // "pass" | "fail" | "error" | "skipped"
  std::string reason;                        // one line (printable) unless pass
  std::string dir;                           // the cell's directory when kept, else ""
  MatrixGate gate;
  MatrixSelf self;
  MatrixControl control;
  double seconds = 0;                        // observed wall time (not part of any verdict)
};

struct MatrixReport {
  int steps = 0;
  std::string cpu_simd;                      // detect_simd()
  std::string default_simd;                  // the process's default path
  std::vector<std::string> supported_simd;   // scalar first
  std::vector<MatrixVariant> variants;
  std::vector<std::string> model_paths;
  std::vector<MatrixCell> cells;             // model-major, then prompt, then variant
  int passed() const, failed() const, errors() const, skipped() const;
  bool ok() const { return failed() == 0 && errors() == 0; }
  int prompt_count() const;  // prompts per model (the same file for every model)

  std::string table() const;  // the text table and a one-line summary (docs/matrix.md)
  std::string json() const;   // ember.kv-matrix.v1, fixed key order
  nlohmann::ordered_json json_doc() const;  // the same document (printable_json for a terminal)
  // Self-contained page; `stamp` names the inputs, build and date (util/html_report.h).
  std::string html(const html::Stamp& stamp = {}) const;
};

// One model at a time: load(path), then each prompt x variant. An Error from load becomes one
// error cell for that model (prompt and variant "*") carrying its line; an Error inside a cell
// makes that cell an error; the matrix always runs to the end. Shows ember::Progress (cells).
using MatrixLoader = std::function<MatrixModel(const std::string& model_path)>;
MatrixReport run_matrix(const std::vector<std::string>& model_paths, const MatrixLoader& load,
                        const std::vector<MatrixVariant>& variants, const MatrixOptions& options);

}  // namespace ember::analysis
