#include "kv/llamacpp_import.h"

#include "kv/import.h"
#include "kv/recompute_rows.h"
#include "model/generate.h"
#include "util/error.h"
#include "util/sha256.h"

namespace ember::kv {

LlamaCppTarget llamacpp_target(const model::Engine& engine, bool attn_rot) {
  const model::ModelConfig& cfg = engine.config();
  return {cfg.n_layers, cfg.n_kv_heads, cfg.head_dim, std::min(cfg.n_ctx, kMaxPositions),
          cfg.n_vocab,  attn_rot};
}

ModelCheck check_llamacpp_state(model::Engine& engine, const LlamaCppState& st, int k, bool run) {
  const int P = st.cache.n_pos;
  const std::vector<int> positions =
      run ? spot_positions(P, k, kModelCheckSeed) : std::vector<int>{P - 1};
  ModelCheck c = check_foreign_rows(engine, st.cache, st.tokens, {st.type_k, st.rot_k},
                                    {st.type_v, st.rot_v}, positions);
  c.skipped = !run;
  return c;
}

VerifiedState import_llamacpp(std::span<const uint8_t> bytes, model::Engine& engine,
                             const std::string& tokenizer_identity,
                             const LlamaCppImportOptions& options, const std::string& where,
                             ModelCheck* check) {
  const model::ModelConfig& cfg = engine.config();
  LlamaCppState st = parse_llamacpp_state(bytes, llamacpp_target(engine, options.attn_rot), where);
  const int P = st.cache.n_pos;
  // Before anything is built: is this the named model's cache of these tokens?
  ModelCheck mc = check_llamacpp_state(engine, st, options.check_positions, options.model_check);
  if (!mc.ok()) refuse_model_check(mc, where);

  KvState s;
  ForeignProvenance f;
  f.engine = kForeignEngineLlamaCpp;
  f.format = "ggsq";
  f.format_version = int(kGgsqVersion);
  f.cache_type_k = ggml_kv_type_name(st.type_k);
  f.cache_type_v = ggml_kv_type_name(st.type_v);
  f.details = {{"v_layout", st.v_trans ? "transposed" : "rows"},
               {"k_rotation", st.rot_k ? "hadamard-" + std::to_string(st.rot_k) : "none"},
               {"v_rotation", st.rot_v ? "hadamard-" + std::to_string(st.rot_v) : "none"}};
  f.conversion = st.exact() ? "exact" : "rounded-to-f16";
  f.source_sha256 = sha256_hex(bytes.data(), bytes.size());
  f.source_bytes = bytes.size();

  s.manifest = describe_target(engine, tokenizer_identity);
  s.manifest.producer = options.producer + "; " + model_check_summary(mc);
  s.manifest.numerics.contract = kForeignContract;
  const std::string fp = engine.fingerprint();
  const size_t w = fp.find("weights=");
  const std::string weights = w == std::string::npos ? "" : fp.substr(w, fp.find(';', w) - w) + ";";
  s.manifest.numerics.engine_fingerprint =
      "llama.cpp;ggsq-v3;" + weights + "k=" + f.cache_type_k + ";v=" + f.cache_type_v +
      ";v_layout=" + f.detail("v_layout");
  s.manifest.prefix.tokens = st.tokens;

  int32_t resume = 0;
  if (options.resume_token) {
    resume = *options.resume_token;
    if (resume < 0 || resume >= cfg.n_vocab)
      fail_field(where, "resume token", "an id in [0, " + std::to_string(cfg.n_vocab) + ")",
                 std::to_string(resume));
    f.resume_source = "argument";
  } else {
    // The model check evaluated the last prompt token over the llama.cpp cache of [0, P-1).
    resume = model::argmax(mc.logits.data(), cfg.n_vocab);
    f.resume_source = "ember-last-prompt-token";
  }
  s.manifest.resume.token = resume;
  s.manifest.resume.position = P;
  s.manifest.past_context = false;
  s.cache = std::move(st.cache);
  s.provenance = std::move(f);
  if (check) *check = std::move(mc);
  return seal(std::move(s), where);
}

std::vector<uint8_t> export_llamacpp(const VerifiedState& s, bool v_trans) {
  std::vector<uint8_t> out;
  BufferSink sink(out);
  write_llamacpp_state(s.cache(), s.manifest().prefix.tokens, v_trans, sink);
  return out;
}

}  // namespace ember::kv
