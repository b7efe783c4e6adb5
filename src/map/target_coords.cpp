#include "map/target_coords.h"

#include "kv/import.h"

namespace ember::map {

kv::SnapshotManifest target_coordinates(const model::Engine& e, const std::string& tok) {
  kv::SnapshotManifest m = kv::describe_target(e, tok);
  m.producer = "ember 0.1.0";
  return m;
}

}  // namespace ember::map
