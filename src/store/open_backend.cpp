// Which backend a URI names (store/backend.h), and the key-pattern rule both backends' scan
// follows, so that dir: and Redis list the same keys for one pattern.
#include <string>
#include <vector>

#include "store/backend.h"
#include "util/error.h"

namespace ember::store {

std::vector<std::string_view> key_components(std::string_view s) {
  std::vector<std::string_view> out;
  size_t b = 0;
  while (true) {
    const size_t e = s.find(':', b);
    out.push_back(s.substr(b, e == std::string_view::npos ? std::string_view::npos : e - b));
    if (e == std::string_view::npos) return out;
    b = e + 1;
  }
}

bool key_matches(std::string_view key, std::string_view pattern) {
  const std::vector<std::string_view> k = key_components(key), p = key_components(pattern);
  if (k.size() != p.size()) return false;
  for (size_t i = 0; i < k.size(); ++i)
    if (p[i] != "*" && p[i] != k[i]) return false;
  return true;
}

std::unique_ptr<Backend> open_backend(const std::string& uri, const BackendOptions& options) {
  if (uri.rfind("dir:", 0) == 0) return open_dir_backend(uri, uri.substr(4));
  if (uri.rfind("redis://", 0) == 0 || uri.rfind("redis+cluster://", 0) == 0)
    return open_redis_backend(uri, options);
  fail_field(uri, "store URI", "dir:PATH, redis://[user@]host:port[/db] or redis+cluster://host:port[,...]",
             "'" + uri + "'");
}

}  // namespace ember::store
