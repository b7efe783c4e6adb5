#pragma once
// Every key name of the store, built and parsed in one place (docs/store.md, "Key layout"), so
// the writer, the readers, ls, verify and gc cannot disagree on what a key means.
//
//   ember:v1:s:{SEAL}:chunk:SHA256   one chunk of a payload (keys, then values), SHA256 of it
//   ember:v1:s:{SEAL}:entry          the entry record, published last, create-only
//   ember:v1:s:{SEAL}:pending        set while a put writes chunks (its start time), then removed
//   ember:v1:s:{SEAL}:hits           how many gets and prefix hits read the entry (best effort)
//   ember:v1:s:{SEAL}:sig:PUBKEY     a signature of the seal by PUBKEY (kv/seal.h), one per signer
//   ember:v1:n:{NS}:name:NAME        a name -> SEAL (create-only; --force replaces)
//   ember:v1:n:{NS}:prefix:H         the chained hash of a prefix's 16-token blocks -> SEAL
//
// SEAL and SHA256 and PUBKEY are 64 lowercase hex digits, NS and H 32 and 64. The braces are
// the Redis Cluster hash tag: one state's keys live in one slot, one namespace's in another.
#include <optional>
#include <string>
#include <string_view>

namespace ember::store {

struct ParsedKey {
  enum class Kind { chunk, entry, pending, hits, signature, name, prefix };
  Kind kind = Kind::entry;
  std::string tag;   // SEAL for a state's keys, NS for a namespace's
  std::string leaf;  // SHA256, PUBKEY, NAME or H; empty for entry, pending and hits
};

struct KeyLayout {
  static std::string entry(const std::string& seal);
  static std::string chunk(const std::string& seal, const std::string& sha);
  static std::string pending(const std::string& seal);
  static std::string hits(const std::string& seal);
  static std::string signature(const std::string& seal, const std::string& public_key);
  static std::string name(const std::string& ns, const std::string& name);
  static std::string prefix(const std::string& ns, const std::string& hash);
  // The prefix every key of one state shares (for messages about a group of keys).
  static std::string state(const std::string& seal);

  // Backend::scan patterns ("*" is one whole component).
  static constexpr const char* kEntries = "ember:v1:s:*:entry";
  static constexpr const char* kChunks = "ember:v1:s:*:chunk:*";
  static constexpr const char* kPendings = "ember:v1:s:*:pending";
  static constexpr const char* kSignatures = "ember:v1:s:*:sig:*";
  static constexpr const char* kNames = "ember:v1:n:*:name:*";
  static constexpr const char* kPrefixes = "ember:v1:n:*:prefix:*";

  // What `key` is, or nullopt when it is not a key of this layout (a malformed seal, namespace,
  // digest or public key; a component too many). A name's NAME is returned as stored, not
  // checked against valid_name: a reader shows it escaped (util/printable.h).
  static std::optional<ParsedKey> parse(std::string_view key);
};

}  // namespace ember::store
