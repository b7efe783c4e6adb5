// The engine as the diagnostics' model. Kept apart from diagnostics.cpp so that the
// measurement logic does not depend on how a forward step is computed.
#include "analysis/diagnostics.h"

namespace ember::analysis {

Diagnostics run_diagnostics(model::Engine& engine, const ComparedState& left,
                            const ComparedState& right, const DiagnosticsOptions& options) {
  const model::ModelConfig& cfg = engine.config();
  DiagnosticModel m;
  m.identity = engine.model().identity();
  m.n_layers = cfg.n_layers;
  m.n_kv_heads = cfg.n_kv_heads;
  m.head_dim = cfg.head_dim;
  m.n_embd = cfg.n_embd;
  m.n_vocab = cfg.n_vocab;
  m.forward = [&engine](model::KvCache& cache, int32_t token, const model::ForwardHooks* hooks) {
    const int32_t in[1] = {token};
    return engine.forward(cache, in, hooks);
  };
  return run_diagnostics(m, left, right, options);
}

}  // namespace ember::analysis
