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

std::string secret_first_line(const std::string& path, const std::string& what) {
  std::string s = read_file(path, 4096);
  const size_t nl = s.find_first_of("\r\n");
  if (nl != std::string::npos) s.resize(nl);
  if (s.empty()) fail_field(path, what, "a non-empty first line", "empty");
  return s;
}

store::BackendOptions store_backend_options(const std::string& password_file) {
  store::BackendOptions o;
  if (!password_file.empty()) {
    o.password = secret_first_line(password_file, "password");
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

store::OnBadState parse_on_bad_state(const std::string& s) {
  if (s == "fail") return store::OnBadState::fail;
  if (s == "recompute") return store::OnBadState::recompute;
  fail_field("--on-bad-state", "value", "fail or recompute", "'" + s + "'");
}

}  // namespace ember::cli
