#include "kv/witness.h"

#include <algorithm>
#include <bit>

#include "kv/snapshot.h"
#include "model/generate.h"
#include "util/error.h"
#include "util/sha256.h"

namespace ember::kv {
namespace {

// Collects, for each layer, what its attention computes at the W witness positions: the raw
// scores of every query head over every key it sees (f32, before the softmax: a changed key
// moves them even where the f16 probabilities round the change away) and the attention output
// rows (after the O-projection), wherever a forward pass evaluates them (one chunk or one
// position at a time). A score row arrives from a pool thread, each (layer, head, position)
// once: it is hashed there into its own slot, so memory stays W digests a head, not W * P
// floats.
class AttentionRows {
 public:
  AttentionRows(const model::ModelConfig& c, int first, int length)
      : n_embd_(size_t(c.n_embd)), heads_(c.n_heads), first_(first), length_(length),
        out_(size_t(c.n_layers), std::vector<float>(size_t(length) * n_embd_)),
        scores_(size_t(c.n_layers), std::vector<Digest>(size_t(c.n_heads) * size_t(length))) {
    hooks_.on_attn_out = [this](int layer, int pos0, int n, const float* out) {
      EMBER_CHECK(layer >= 0 && size_t(layer) < out_.size() && pos0 >= first_ && pos0 + n <= first_ + length_);
      std::copy_n(out, size_t(n) * n_embd_, out_[size_t(layer)].data() + size_t(pos0 - first_) * n_embd_);
    };
    hooks_.on_scores = [this](int layer, int head, int pos, const float* scores, int len) {
      EMBER_CHECK(layer >= 0 && size_t(layer) < scores_.size() && head >= 0 && head < heads_ && pos >= first_ &&
                  pos < first_ + length_ && len == pos + 1);
      scores_[size_t(layer)][size_t(head) * size_t(length_) + size_t(pos - first_)] =
          digest_f32(std::span<const float>(scores, size_t(len)));
    };
  }
  const model::ForwardHooks* hooks() const { return &hooks_; }
  // Per layer: SHA-256 over its score rows' digests (head-major, positions in order), then its
  // output rows as f32 little-endian.
  std::vector<std::string> hashes() const {
    std::vector<std::string> out;
    out.reserve(out_.size());
    for (size_t l = 0; l < out_.size(); ++l) {
      Sha256 h;
      for (const Digest& d : scores_[l]) h.update(d.data(), d.size());
      const Digest o = digest_f32(out_[l]);
      h.update(o.data(), o.size());
      out.push_back(to_hex(h.finish()));
    }
    return out;
  }

 private:
  static Digest digest_f32(std::span<const float> v) {
    static_assert(std::endian::native == std::endian::little, "f32 little-endian rows are hashed as they lie");
    Sha256 h;
    h.update(v.data(), v.size() * sizeof(float));
    return h.finish();
  }
  size_t n_embd_;
  int heads_, first_, length_;
  std::vector<std::vector<float>> out_;
  std::vector<std::vector<Digest>> scores_;
  model::ForwardHooks hooks_;
};

}  // namespace

Witness record_witness(model::Engine& engine, const model::KvCache& cache, int32_t resume, int length) {
  const int room = engine.position_limit() - cache.n_pos;
  length = std::min(length, room);
  if (length < 1) return {};
  const model::ModelConfig& c = engine.config();
  model::KvCache work = cache.copy_rows(cache.n_pos, length);
  AttentionRows attention(c, cache.n_pos, length);
  Witness w;
  std::vector<float> logits;
  int32_t next = resume;
  for (int i = 0; i < length; ++i) {
    w.tokens.push_back(next);
    logits = engine.forward(work, std::span<const int32_t>(&next, 1), attention.hooks());
    next = model::argmax(logits.data(), int(logits.size()));
  }
  w.logits_sha256 = logits_hash(logits);  // the last position's
  w.attention_sha256 = attention.hashes();
  return w;
}

Witness run_witness(model::Engine& engine, const model::KvCache& cache, std::span<const int32_t> tokens) {
  const int length = int(tokens.size());
  if (length < 1) return {};
  const model::ModelConfig& c = engine.config();
  model::KvCache work = cache.copy_rows(cache.n_pos, length);
  AttentionRows attention(c, cache.n_pos, length);
  // The last position's logits only: those before it follow from the attention hashes (the
  // same attention at every layer and position, the same residuals, the same logits), and
  // the LM head of every position would be a quarter of the chunk on a 0.5B model.
  const std::vector<float> logits = engine.forward(work, tokens, attention.hooks());
  Witness w;
  w.tokens.assign(tokens.begin(), tokens.end());
  w.logits_sha256 = logits_hash(logits);
  w.attention_sha256 = attention.hashes();
  return w;
}

}  // namespace ember::kv
