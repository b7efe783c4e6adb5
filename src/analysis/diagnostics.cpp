#include "analysis/diagnostics.h"

#include <algorithm>
#include <cstring>

#include "util/error.h"
#include "util/kl.h"

namespace ember::analysis {

namespace {

// Argmax with the lowest index on ties; NaN never wins (a comparison with NaN is false).
int32_t argmax(const std::vector<float>& logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[size_t(best)] || (logits[size_t(best)] != logits[size_t(best)] &&
                                             logits[i] == logits[i])) {
      best = int32_t(i);
    }
  }
  return best;
}

// Records the attention output after the O-projection of each layer for one token.
struct AttnRecorder {
  std::vector<std::vector<float>> rows;  // [n_layers][n_embd]
  model::ForwardHooks hooks;
  AttnRecorder(int n_layers, int n_embd)
      : rows(size_t(n_layers), std::vector<float>(size_t(n_embd))) {
    hooks.on_attn_out = [this, n_embd](int layer, int, int n, const float* attn_out) {
      EMBER_CHECK(n == 1 && layer >= 0 && size_t(layer) < rows.size());
      std::memcpy(rows[size_t(layer)].data(), attn_out, size_t(n_embd) * sizeof(float));
    };
  }
};

void check_against_model(const DiagnosticModel& cfg, const ComparedState& s,
                         const char* side) {
  const StateCoordinates& x = s.coords;
  const std::string where = std::string("kv compare --model (") + side + ")";
  if (x.n_layers != cfg.n_layers || x.n_kv_heads != cfg.n_kv_heads ||
      x.head_dim != cfg.head_dim) {
    fail_field(where, "cache geometry",
               std::to_string(cfg.n_layers) + "x" + std::to_string(cfg.n_kv_heads) + "x" +
                   std::to_string(cfg.head_dim) + " (the model's)",
               std::to_string(x.n_layers) + "x" + std::to_string(x.n_kv_heads) + "x" +
                   std::to_string(x.head_dim));
  }
  if (x.resume_token < 0 || x.resume_token >= cfg.n_vocab) {
    fail_field(where, "resume token", "an id in [0, " + std::to_string(cfg.n_vocab) + ")",
               std::to_string(x.resume_token));
  }
}

}  // namespace

Diagnostics run_diagnostics(const DiagnosticModel& model, const ComparedState& left,
                            const ComparedState& right, const DiagnosticsOptions& options) {
  const std::string& model_id = model.identity;
  if (left.identity.model_identity != model_id) {
    fail_field("kv compare --model", "LEFT model identity", model_id + " (the loaded model)",
               left.identity.model_identity);
  }
  if (options.steps < 1 || options.steps > 4096) {
    fail_field("kv compare", "--steps", "1..4096", std::to_string(options.steps));
  }
  check_against_model(model, left, "LEFT");
  check_against_model(model, right, "RIGHT");
  const DiagnosticModel& cfg = model;
  const int steps = options.steps;

  Diagnostics d;
  d.model_identity = model_id;
  d.steps = steps;

  // Same-input phase: both sides evaluate LEFT's reference-greedy path.
  {
    model::KvCache cl = left.cache.copy_rows(left.cache.n_pos, steps);
    model::KvCache cr = right.cache.copy_rows(right.cache.n_pos, steps);
    AttnRecorder rec_l(cfg.n_layers, cfg.n_embd), rec_r(cfg.n_layers, cfg.n_embd);
    int32_t token = left.coords.resume_token;
    for (int s = 0; s < steps; ++s) {
      SameInputStep st;
      st.step = s;
      st.position = cl.n_pos;
      st.input_token = token;
      const std::vector<float> ll = model.forward(cl, token, &rec_l.hooks);
      const std::vector<float> lr = model.forward(cr, token, &rec_r.hooks);
      EMBER_CHECK(ll.size() == size_t(cfg.n_vocab) && lr.size() == ll.size());
      for (int l = 0; l < cfg.n_layers; ++l) {
        st.attn_out.push_back(compare_vectors(rec_l.rows[size_t(l)].data(),
                                              rec_r.rows[size_t(l)].data(), size_t(cfg.n_embd)));
      }
      st.logits = compare_vectors(ll.data(), lr.data(), ll.size());
      st.logits_kl = kl_divergence(ll.data(), lr.data(), ll.size());
      st.top1_left = argmax(ll);
      st.top1_right = argmax(lr);
      if (st.top1_left == st.top1_right) {
        ++d.same_input.top1_agreement;
      } else if (!d.same_input.first_disagreement) {
        d.same_input.first_disagreement = s;
      }
      d.same_input.steps.push_back(std::move(st));
      token = d.same_input.steps.back().top1_left;
    }
    {
      bool all = !d.same_input.steps.empty();
      double sum = 0, max = 0;
      for (const SameInputStep& st : d.same_input.steps) {
        if (!st.logits_kl) all = false;
        else { sum += *st.logits_kl; max = std::max(max, *st.logits_kl); }
      }
      if (all) {
        d.same_input.mean_kl = sum / double(d.same_input.steps.size());
        d.same_input.max_kl = max;
      }
    }
  }

  // Independent greedy phase: clean copies, each side follows its own argmax.
  auto greedy = [&](const ComparedState& side) {
    model::KvCache c = side.cache.copy_rows(side.cache.n_pos, steps);
    std::vector<int32_t> seq{side.coords.resume_token};
    for (int s = 0; s < steps; ++s) {
      seq.push_back(argmax(model.forward(c, seq.back(), nullptr)));
    }
    return seq;
  };
  d.greedy.left = greedy(left);
  d.greedy.right = greedy(right);
  for (size_t i = 0; i < d.greedy.left.size(); ++i) {
    if (d.greedy.left[i] != d.greedy.right[i]) {
      d.greedy.first_divergence = int(i);
      break;
    }
    ++d.greedy.agreeing_prefix;
  }
  return d;
}

}  // namespace ember::analysis
