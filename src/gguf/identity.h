#pragma once
// Model identity: a SHA-256 that names "these weights for this architecture", independent of
// the file name, of metadata unrelated to the architecture (general.name, tokenizer, ...),
// of metadata order and of tensor order. Two files with equal identities compute the same
// function (same arch hyper-parameters, same tensor bytes). Canonical form: docs/identity.md.
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "util/sha256.h"

namespace ember::gguf {

struct ModelIdentity {
  Digest id;            // the model identity (hash of the two parts below)
  Digest architecture;  // canonical general.architecture + "<arch>.*" metadata
  Digest tensors;       // every tensor's name and tensor_hash, sorted by name
  std::string hex() const { return to_hex(id); }
};

// Reads every tensor's bytes once (hashing streams through the mapping).
ModelIdentity model_identity(const GgufFile& file);

// Hash of one tensor's content: type, shape and bytes, NOT its name, so the same weights under
// the same name in two models (shared lower layers of a fine-tune) compare equal.
Digest tensor_hash(const TensorInfo& t);

// The metadata keys that enter the identity, sorted: general.architecture and "<arch>.*".
std::vector<std::string> identity_metadata_keys(const GgufFile& file);

}  // namespace ember::gguf
