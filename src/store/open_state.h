#pragma once
// The one way a command reads a state, whatever holds it: a snapshot directory, a KVC1 file, or
// a state in a store, named as STORE_URI#REF:
//
//   snap/                                    a directory (kv::read_state_dir)
//   snap.kvc                                 a KVC1 file (kv::read_kvc1_state)
//   dir:/srv/kv#1f0e...c9/chat-1             a store's NAMESPACE/NAME (as `store ls` prints it)
//   redis://127.0.0.1:6379#<64 hex digits>   a store's state by seal
//
// Each is read by its one reader and verified once (kv::read_payloads); a kind the command
// does not accept is refused by name. A store holds native states only.
#include <string>

#include "kv/state.h"
#include "store/backend.h"

namespace ember::store {

// Whether `ref` names a state in a store (a store URI, then '#', then a reference).
bool is_store_ref(const std::string& ref);

// Reads and verifies the state `ref` names (above). Error naming `ref` when it is none of them,
// or its reader refuses it.
kv::VerifiedState open_state(const std::string& ref, const kv::ReadOptions& options = {},
                             const BackendOptions& backend = {});

}  // namespace ember::store
