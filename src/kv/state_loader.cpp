#include "kv/state_loader.h"

#include <sys/stat.h>

#include <cstring>
#include <fstream>

#include "kv/kvc1_snapshot.h"
#include "util/error.h"

namespace ember::kv {

std::string state_kind(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  if (S_ISDIR(st.st_mode)) return "snapshot-dir";
  if (S_ISREG(st.st_mode)) {
    char magic[4] = {};
    std::ifstream in(path, std::ios::binary);
    in.read(magic, 4);
    if (in.gcount() == 4 && std::memcmp(magic, "KVC1", 4) == 0) return "kvc1";
  }
  return "";
}

Snapshot load_state(const std::string& path, bool allow_non_finite) {
  const std::string kind = state_kind(path);
  if (kind == "snapshot-dir") return read_snapshot(path, allow_non_finite);
  if (kind == "kvc1") {
    // every KVC1 check, native only (docs/formats/kvc1.md)
    return read_kvc1_snapshot(path, allow_non_finite);
  }
  fail_field(path, "state", "a snapshot directory or a KVC1 file", "neither (missing or unknown)");
}

StateDir load_state_as(const std::string& path, Accept accept, bool allow_non_finite) {
  const std::string kind = state_kind(path);
  if (kind == "snapshot-dir") return read_state_dir(path, {accept, allow_non_finite});
  if (kind == "kvc1") return read_kvc1_state(path, accept, allow_non_finite);
  fail_field(path, "state", "a snapshot directory or a KVC1 file", "neither (missing or unknown)");
}

}  // namespace ember::kv
