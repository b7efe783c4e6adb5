#pragma once
// Applying a mapper to a source cache, and the layer roles of a handoff.
//
// Keys: the source cache holds post-RoPE f16 keys. A mapped key row is de-rotated with the
// source model's RoPE at its absolute position (inverse rotation, f32), mapped in pre-RoPE
// content space in f64, rotated with the target model's RoPE at the same position, and rounded
// to f16. Values are mapped directly. A head whose K and V maps are exactly the identity, with
// identical RoPE semantics on both sides, is copied bit for bit (de-rotating and rotating again
// is not a bitwise inverse, and the identity map must give exactly the native state).
#include <string>
#include <vector>

#include "map/mapper.h"
#include "model/config.h"
#include "model/kv_cache.h"

namespace ember::map {

enum class LayerRole { reused, mapped, recomputed, kv_projected };
const char* layer_role_name(LayerRole r);

// Geometry of a model as the mapper records it (identity given separately).
ModelGeometry geometry_of(const model::ModelConfig& config, const std::string& identity);

// True when RoPE is applied identically by both configs (layout, theta, head dim, scaling).
bool same_rope(const model::ModelConfig& a, const model::ModelConfig& b);

// Fills target layers [first, last) of `dst` from `src` (positions [0, src.n_pos)): layers
// below `reuse_below` are copied bit for bit (shared layers), the rest mapped with `mapper`.
// dst must have the target geometry and capacity >= src.n_pos; its cursor is not moved.
// Error if the mapper's source/target geometry does not match the configs.
void map_layers(const Mapper& mapper, const model::ModelConfig& source_config,
                const model::ModelConfig& target_config, const model::KvCache& src,
                int reuse_below, int first, int last, model::KvCache& dst);

}  // namespace ember::map
