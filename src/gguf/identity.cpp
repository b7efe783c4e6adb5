#include "gguf/identity.h"

#include <algorithm>
#include <cstring>

#include "util/error.h"

namespace ember::gguf {
namespace {

// Canonical value encoding (docs/identity.md): a tag byte, then the value. Integers of every
// width and signedness collapse to one tag so that a converter's choice of uint32 vs int32
// for "block_count = 24" does not change the identity; floats are hashed as the IEEE double of
// their value (float32 widens exactly).
void hash_value(Sha256& h, const Value& v) {
  auto tag = [&](char c) { h.update(&c, 1); };
  switch (v.type) {
    case ValueType::UINT8: case ValueType::UINT16: case ValueType::UINT32:
    case ValueType::UINT64:
      if (v.u > uint64_t(INT64_MAX)) {
        tag('u');
        h.update_u64(v.u);
      } else {
        tag('i');
        h.update_u64(v.u);
      }
      break;
    case ValueType::INT8: case ValueType::INT16: case ValueType::INT32: case ValueType::INT64:
      tag('i');
      h.update_u64(uint64_t(v.i));  // two's complement: -1 and 2^64-1 differ by tag 'u' above
      break;
    case ValueType::FLOAT32: case ValueType::FLOAT64: {
      tag('f');
      uint64_t bits;
      const double d = v.f;
      std::memcpy(&bits, &d, 8);
      h.update_u64(bits);
      break;
    }
    case ValueType::BOOL:
      tag('b');
      h.update_u64(v.u ? 1 : 0);
      break;
    case ValueType::STRING:
      tag('s');
      h.update_field(v.str);
      break;
    case ValueType::ARRAY:
      tag('a');
      h.update_u64(v.array.size());
      for (const Value& e : v.array) hash_value(h, e);
      break;
  }
}

}  // namespace

std::vector<std::string> identity_metadata_keys(const GgufFile& file) {
  const std::string arch = file.get_string("general.architecture");
  const std::string prefix = arch + ".";
  std::vector<std::string> keys;
  for (const auto& kv : file.metadata())
    if (kv.first == "general.architecture" || kv.first.rfind(prefix, 0) == 0)
      keys.push_back(kv.first);
  std::sort(keys.begin(), keys.end());
  return keys;
}

Digest tensor_hash(const TensorInfo& t) {
  Sha256 h;
  h.update_field("ember.tensor.v1");
  h.update_field(type_name(uint32_t(t.type)));
  h.update_u64(t.shape.size());
  for (uint64_t d : t.shape) h.update_u64(d);
  h.update_u64(t.n_bytes);
  h.update(t.data, size_t(t.n_bytes));
  return h.finish();
}

ModelIdentity model_identity(const GgufFile& file) {
  ModelIdentity out;
  {
    Sha256 h;
    h.update_field("ember.model-architecture.v1");
    const auto keys = identity_metadata_keys(file);
    h.update_u64(keys.size());
    for (const std::string& k : keys) {
      h.update_field(k);
      hash_value(h, *file.find(k));
    }
    out.architecture = h.finish();
  }
  {
    std::vector<const TensorInfo*> sorted;
    for (const TensorInfo& t : file.tensors()) sorted.push_back(&t);
    std::sort(sorted.begin(), sorted.end(),
              [](const TensorInfo* a, const TensorInfo* b) { return a->name < b->name; });
    Sha256 h;
    h.update_field("ember.model-tensors.v1");
    h.update_u64(sorted.size());
    for (const TensorInfo* t : sorted) {
      h.update_field(t->name);
      const Digest d = tensor_hash(*t);
      h.update(d.data(), d.size());
    }
    out.tensors = h.finish();
  }
  Sha256 h;
  h.update_field("ember.model-identity.v1");
  h.update(out.architecture.data(), out.architecture.size());
  h.update(out.tensors.data(), out.tensors.size());
  out.id = h.finish();
  return out;
}

}  // namespace ember::gguf
