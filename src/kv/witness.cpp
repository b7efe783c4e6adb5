#include "kv/witness.h"

#include <algorithm>

#include "kv/snapshot.h"
#include "model/generate.h"
#include "util/error.h"

namespace ember::kv {
namespace {

// A copy of `cache` with room for `extra` more positions, its cursor at the cache's.
model::KvCache working_copy(model::Engine& engine, const model::KvCache& cache, int extra) {
  model::KvCache work = engine.new_cache(cache.n_pos + extra);
  work.copy_prefix(cache, cache.n_pos);
  work.n_pos = cache.n_pos;
  return work;
}

// Collects each layer's attention output rows of the W witness positions, wherever a forward
// pass evaluates them (one chunk or one position at a time).
class AttentionRows {
 public:
  AttentionRows(int layers, int n_embd, int first, int length)
      : n_embd_(size_t(n_embd)), first_(first), length_(length),
        rows_(size_t(layers), std::vector<float>(size_t(length) * size_t(n_embd))) {
    hooks_.on_attn_out = [this](int layer, int pos0, int n, const float* out) {
      EMBER_CHECK(layer >= 0 && size_t(layer) < rows_.size() && pos0 >= first_ && pos0 + n <= first_ + length_);
      std::copy_n(out, size_t(n) * n_embd_, rows_[size_t(layer)].data() + size_t(pos0 - first_) * n_embd_);
    };
  }
  const model::ForwardHooks* hooks() const { return &hooks_; }
  std::vector<std::string> hashes() const {
    std::vector<std::string> out;
    out.reserve(rows_.size());
    for (const std::vector<float>& r : rows_) out.push_back(logits_hash(r));
    return out;
  }

 private:
  size_t n_embd_;
  int first_, length_;
  std::vector<std::vector<float>> rows_;
  model::ForwardHooks hooks_;
};

}  // namespace

Witness record_witness(model::Engine& engine, const model::KvCache& cache, int32_t resume, int length) {
  const int room = engine.position_limit() - cache.n_pos;
  length = std::min(length, room);
  if (length < 1) return {};
  const model::ModelConfig& c = engine.config();
  model::KvCache work = working_copy(engine, cache, length);
  AttentionRows attention(c.n_layers, c.n_embd, cache.n_pos, length);
  Witness w;
  std::vector<float> logits;
  logits.reserve(size_t(length) * size_t(c.n_vocab));
  int32_t next = resume;
  for (int i = 0; i < length; ++i) {
    w.tokens.push_back(next);
    const std::vector<float> row = engine.forward(work, std::span<const int32_t>(&next, 1), attention.hooks());
    logits.insert(logits.end(), row.begin(), row.end());
    next = model::argmax(row.data(), int(row.size()));
  }
  w.logits_sha256 = logits_hash(logits);
  w.attention_sha256 = attention.hashes();
  return w;
}

Witness run_witness(model::Engine& engine, const model::KvCache& cache, std::span<const int32_t> tokens) {
  const int length = int(tokens.size());
  if (length < 1) return {};
  const model::ModelConfig& c = engine.config();
  model::KvCache work = working_copy(engine, cache, length);
  AttentionRows attention(c.n_layers, c.n_embd, cache.n_pos, length);
  const std::vector<float> logits = engine.forward(work, tokens, attention.hooks(), /*all_logits=*/true);
  Witness w;
  w.tokens.assign(tokens.begin(), tokens.end());
  w.logits_sha256 = logits_hash(logits);
  w.attention_sha256 = attention.hashes();
  return w;
}

}  // namespace ember::kv
