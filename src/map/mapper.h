#pragma once
// The fitted KV mapper (artifact ember.kv-mapper.v2, docs/mapping.md): per target layer and
// KV head, a K map (pre-RoPE content space) and a V map (value state), plus optional residual
// maps at layer boundaries (for a recompute anchor a > s). Source layer l maps to target
// layer l and source head h to target head h; head dims may differ unless anchored.
//
// On disk: a directory with manifest.json and weights.f64le. The mapper hash is SHA-256 over
// "ember.kv-mapper.v2\n" followed by the compact, key-sorted JSON of the manifest without its
// own "mapper_hash" field; the manifest holds the SHA-256 of weights.f64le, so the hash
// covers every weight bit, the identities, the split hash, lambda and the relation label.
// v2 added "relation" (kv::kRelations); a v1 mapper is refused by name (refit it).
#include <cstdint>
#include <string>
#include <vector>

#include "map/calibration.h"
#include "map/ridge.h"

namespace ember::map {

inline constexpr const char* kMapperFormat = "ember.kv-mapper.v2";

enum class MapperKind { identity, ridge, affine };
const char* mapper_kind_name(MapperKind k);
MapperKind parse_mapper_kind(const std::string& s, const std::string& where);

struct MapperOptions {
  MapperKind kind = MapperKind::ridge;
  double lambda = 1e-3;
  bool anchor_identity = false;  // ridge/affine: penalize ||W - I||^2 (needs equal head dims)
  bool residual_maps = false;    // also fit residual maps at boundaries (s, L)
  std::string relation;          // kv::kRelations; required to write the mapper
  int threads = 1;               // maps solved at once (each solve is single-threaded: same bits)
  std::string progress_label = "fit";  // ember::Progress on a terminal
};

struct HeadMaps {
  LinearMap k, v;
  // R^2 on the calibration rows (train) and on the evaluation rows (held out; NaN if none).
  double k_r2_train = 0, k_r2_eval = 0, v_r2_train = 0, v_r2_eval = 0;
};

struct ResidualMap {
  int boundary = 0;  // the residual entering target layer `boundary`
  LinearMap map;
  double r2_train = 0, r2_eval = 0;
};

struct Mapper {
  MapperKind kind = MapperKind::identity;
  double lambda = 0;  // 0 for identity
  bool affine = false;
  bool anchor_identity = false;
  std::string relation;  // quantization-boundary | same-base | cross-model (kv::kRelations)
  ModelGeometry source, target;
  std::string tokenizer_identity;
  std::string split_hash;  // of the calibration split ("" for an unfitted identity map)
  int shared_layers = 0;
  int64_t calib_rows = 0, eval_rows = 0;
  std::vector<HeadMaps> heads;          // [layer * n_kv_heads + head]
  std::vector<ResidualMap> residual;    // increasing boundaries

  const HeadMaps& head(int layer, int h) const { return heads[size_t(layer) * target.n_kv_heads + h]; }
  const ResidualMap* residual_at(int boundary) const;

  // The manifest without "mapper_hash" (weights_sha256 = SHA-256 of the weights payload).
  nlohmann::json manifest() const;
  std::string hash() const;
  void write(const std::string& dir, bool force) const;
  // Strict read: format, relation, payload size and SHA-256, shapes, recomputed mapper hash.
  // write() refuses a mapper whose relation is not one of kv::kRelations.
  static Mapper read(const std::string& dir);
  // The same read over bytes already in memory (what read() does after opening the two files;
  // the fuzz target's entry point). mpath/wpath name the manifest and weights in errors.
  static Mapper parse(const std::string& manifest_text, const uint8_t* weights, size_t weights_size,
                      const std::string& mpath, const std::string& wpath);
};

// The identity mapper (source K/V used as the target's). Needs equal geometry.
Mapper identity_mapper(const ModelGeometry& source, const ModelGeometry& target,
                       const std::string& tokenizer_identity, int shared_layers, const std::string& relation = "");

// Fits every map on the calibration side of the set's statistics (the evaluation side never
// enters a solve) and scores R² on both sides (train: the calibration rows; eval: the held-out
// rows), from the statistics (NormalEquations::r2).
Mapper fit_mapper(const CalibrationSet& set, const MapperOptions& options);

}  // namespace ember::map
