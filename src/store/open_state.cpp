#include "store/open_state.h"

#include "store/store.h"
#include "util/error.h"

namespace ember::store {

bool is_store_ref(const std::string& ref) {
  const size_t hash = ref.find('#');
  if (hash == std::string::npos) return false;
  for (const char* scheme : {"dir:", "redis://", "redis+cluster://"})
    if (ref.rfind(scheme, 0) == 0) return true;
  return false;
}

kv::VerifiedState open_state(const std::string& ref, const kv::ReadOptions& options, const BackendOptions& backend) {
  if (!is_store_ref(ref)) return kv::open_state(ref, options);
  const size_t hash = ref.rfind('#');
  const std::string uri = ref.substr(0, hash), name = ref.substr(hash + 1);
  if (!kv::accepts(options.accept, kv::StateKind::native))
    fail_field(ref, "state", "a directory or a .kvc (a store holds native snapshots only)", "a store reference");
  Store store = Store::open(uri, backend);
  // A store's get is a verified read like the others; it always checks finiteness (a store
  // never holds a non-finite state).
  return store.get_ref(name, options.capacity);
}

}  // namespace ember::store
