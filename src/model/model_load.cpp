// Model::load: open the GGUF, check the configuration, bind the weights to the mapping.
#include <algorithm>
#include <mutex>
#include <set>

#include "gguf/dequantize.h"
#include "gguf/identity.h"
#include "model/weights.h"
#include "util/error.h"

namespace ember::model {

namespace {

std::string blk(int layer, const char* what) {
  return "blk." + std::to_string(layer) + "." + what;
}

ops::WeightMatrix matrix(const gguf::GgufFile& f, const std::string& name,
                         std::set<std::string>& types) {
  const gguf::TensorInfo& t = f.tensor(name);
  const auto tr = gguf::type_traits(uint32_t(t.type));
  if (!tr || !tr->supported || !ops::matmul_supports(t.type))
    fail_field(f.path(), "tensor " + name + " type", "a weight type ember's matmul supports",
               gguf::type_name(uint32_t(t.type)));
  types.insert(tr->name);
  return ops::WeightMatrix{t.type, t.data, int64_t(t.n_rows()), int64_t(t.row_length())};
}

std::vector<float> vec(const gguf::GgufFile& f, const std::string& name) {
  const gguf::TensorInfo& t = f.tensor(name);
  if (t.type != gguf::TensorType::F32 && t.type != gguf::TensorType::F16 &&
      t.type != gguf::TensorType::BF16)
    fail_field(f.path(), "tensor " + name + " type", "f32, f16 or bf16",
               gguf::type_name(uint32_t(t.type)));
  return gguf::dequantize_tensor(t);
}

class LoadedModel final : public Model {
 public:
  explicit LoadedModel(gguf::GgufFile file) : file_(std::move(file)) {
    config_ = ModelConfig::from_gguf(file_);
    const ModelConfig& c = config_;
    std::set<std::string> types;
    ModelWeights& w = weights_;
    w.token_embd = matrix(file_, "token_embd.weight", types);
    w.output = c.tied_output ? w.token_embd : matrix(file_, "output.weight", types);
    if (c.tied_output) types.insert(gguf::traits(w.token_embd.type).name);
    w.output_norm = vec(file_, "output_norm.weight");
    w.layers.resize(size_t(c.n_layers));
    for (int l = 0; l < c.n_layers; ++l) {
      LayerWeights& L = w.layers[size_t(l)];
      L.wq = matrix(file_, blk(l, "attn_q.weight"), types);
      L.wk = matrix(file_, blk(l, "attn_k.weight"), types);
      L.wv = matrix(file_, blk(l, "attn_v.weight"), types);
      L.wo = matrix(file_, blk(l, "attn_output.weight"), types);
      if (c.ffn_activation == FfnActivation::swiglu) L.w_gate = matrix(file_, blk(l, "ffn_gate.weight"), types);
      L.w_up = matrix(file_, blk(l, "ffn_up.weight"), types);
      L.w_down = matrix(file_, blk(l, "ffn_down.weight"), types);
      L.attn_norm = vec(file_, blk(l, "attn_norm.weight"));
      L.ffn_norm = vec(file_, blk(l, "ffn_norm.weight"));
      if (c.qkv_bias) {
        L.bq = vec(file_, blk(l, "attn_q.bias"));
        L.bk = vec(file_, blk(l, "attn_k.bias"));
        L.bv = vec(file_, blk(l, "attn_v.bias"));
      }
      if (c.qk_norm) {
        L.q_norm = vec(file_, blk(l, "attn_q_norm.weight"));
        L.k_norm = vec(file_, blk(l, "attn_k_norm.weight"));
      }
    }
    w.matrix_types.assign(types.begin(), types.end());
  }
  const ModelConfig& config() const override { return config_; }
  const gguf::GgufFile& file() const override { return file_; }
  // Computed on first use: it reads every weight byte once (seconds for a 1-2 B model), which
  // `ember run` never needs.
  const std::string& identity() const override {
    std::call_once(identity_once_, [this] { identity_ = gguf::model_identity(file_).hex(); });
    return identity_;
  }
  const ModelWeights& weights() const { return weights_; }

 private:
  gguf::GgufFile file_;
  ModelConfig config_;
  ModelWeights weights_;
  mutable std::once_flag identity_once_;
  mutable std::string identity_;
};

}  // namespace

std::shared_ptr<const Model> Model::load(const std::string& gguf_path) {
  return load(gguf::GgufFile::open(gguf_path));
}

std::shared_ptr<const Model> Model::load(gguf::GgufFile file) {
  return std::make_shared<const LoadedModel>(std::move(file));
}

const ModelWeights& weights_of(const Model& model) {
  const auto* m = dynamic_cast<const LoadedModel*>(&model);
  if (!m) fail("model", "not a model loaded by Model::load");
  return m->weights();
}

}  // namespace ember::model
