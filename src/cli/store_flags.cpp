#include "cli/store_flags.h"

#include <cstdlib>

#include "store/open_state.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace ember::cli {

void add_password_file_flag(CLI::App* c, std::string& path) {
  c->add_option("--password-file", path,
                "read the Redis password from FILE (default: $EMBER_REDIS_PASSWORD; never on the command line)");
}

store::BackendOptions store_backend_options(const std::string& password_file) {
  store::BackendOptions o;
  if (!password_file.empty()) {
    std::string p = read_file(password_file, 4096);
    const size_t nl = p.find_first_of("\r\n");
    if (nl != std::string::npos) p.resize(nl);
    if (p.empty()) fail_field(password_file, "password", "a non-empty first line", "empty");
    o.password = p;
  } else if (const char* env = std::getenv("EMBER_REDIS_PASSWORD"); env && *env) {
    o.password = env;
  }
  return o;
}

kv::VerifiedState open_state_ref(const std::string& ref, const kv::ReadOptions& options) {
  return store::open_state(ref, options, store::is_store_ref(ref) ? store_backend_options("") : store::BackendOptions{});
}

uint64_t parse_count_flag(const std::string& flag, const std::string& unit, const std::string& text) {
  const bool digits = !text.empty() && text.size() <= 18 && text.find_first_not_of("0123456789") == std::string::npos;
  if (!digits) fail_field(flag, unit, "a non-negative integer (at most 18 digits)", "'" + text + "'");
  return std::stoull(text);
}

store::OnMiss parse_on_miss(const std::string& s) {
  if (s == "fail") return store::OnMiss::fail;
  if (s == "recompute") return store::OnMiss::recompute;
  fail_field("--on-miss", "value", "fail or recompute", "'" + s + "'");
}

}  // namespace ember::cli
