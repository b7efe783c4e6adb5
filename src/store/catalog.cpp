// ls, verify, rm, gc and stats: one pass over every key of the store (the catalog), then
// checks and removals. Removal order keeps every reader safe: pointers first (no reader is
// sent to a state being removed), then the record, then the chunks, and those only while no
// record exists (Backend::remove_unless_exists), so a put racing this cannot lose its chunks
// (docs/store.md, "put and gc").
#include <algorithm>
#include <ctime>
#include <set>

#include "kv/seal.h"
#include "kv/strict_json.h"
#include "store/store.h"
#include "util/error.h"
#include "util/hex.h"

namespace ember::store {
namespace {

constexpr size_t kMaxSmallValue = 128;  // a seal, a pending time

int64_t now_s(int64_t now) { return now != 0 ? now : int64_t(std::time(nullptr)); }

// The seal of a state key of `kind`, or "" for a key this layout does not define.
std::string seal_of(const std::string& k, ParsedKey::Kind kind) {
  const std::optional<ParsedKey> p = KeyLayout::parse(k);
  return p && p->kind == kind ? p->tag : std::string();
}

// Does the name or prefix key `key` belong with the stored, valid state `seal`? A name must be
// in the state's namespace; a prefix key too, and its hash must be one of the state's prompt.
// Each state's chain is hashed once per pass (`chains`), not once per prefix key.
class PointerCheck {
 public:
  explicit PointerCheck(const Catalog& c) : c_(c) {}
  bool fits(const std::string& key, const std::string& seal, std::string* why) {
    const std::optional<ParsedKey> p = KeyLayout::parse(key);
    auto it = c_.seals.find(seal);
    if (!p || it == c_.seals.end() || !it->second.entry) return true;  // dangling: reported as such
    const Entry& e = *it->second.entry;
    if (e.ns != p->tag) {
      *why = "points at state " + seal + " of namespace " + e.ns + " (model " + e.manifest.model.identity +
             "), not of its own namespace " + p->tag;
      return false;
    }
    if (p->kind == ParsedKey::Kind::prefix) {
      auto [c, fresh] = chains_.try_emplace(seal);
      if (fresh)
        for (std::string& h : prefix_chain(e.ns, e.manifest.prefix.tokens)) c->second.insert(std::move(h));
      if (!c->second.count(p->leaf)) {
        *why = "points at state " + seal + ", whose prompt does not have this prefix hash";
        return false;
      }
    }
    return true;
  }

 private:
  const Catalog& c_;
  std::map<std::string, std::set<std::string>> chains_;
};

}  // namespace

Catalog Store::catalog() {
  Catalog c;
  for (const std::string& k : b_->scan(KeyLayout::kEntries)) {
    const std::string seal = seal_of(k, ParsedKey::Kind::entry);
    if (seal.empty()) continue;
    Catalog::Item& it = c.seals[seal];
    it.has_entry = true;
    try {
      it.entry = read_entry(seal);
    } catch (const Error& e) {
      it.entry_error = e.what();
    }
    // One bad counter is that entry's unknown, not the whole listing's failure.
    try {
      it.hits = b_->counter(KeyLayout::hits(seal));
    } catch (const Error& e) {
      it.hits_error = e.what();
    }
  }
  for (const std::string& k : b_->scan(KeyLayout::kChunks)) {
    const std::string seal = seal_of(k, ParsedKey::Kind::chunk);
    if (!seal.empty()) c.seals[seal].chunk_keys.push_back(k);
  }
  for (const std::string& k : b_->scan(KeyLayout::kSignatures)) {
    const std::string seal = seal_of(k, ParsedKey::Kind::signature);
    if (!seal.empty()) c.seals[seal].signature_keys.push_back(k);
  }
  for (const std::string& k : b_->scan(KeyLayout::kPendings)) {
    const std::string seal = seal_of(k, ParsedKey::Kind::pending);
    if (seal.empty()) continue;
    Catalog::Item& it = c.seals[seal];
    it.has_pending = true;
    const std::optional<std::string> v = b_->get(k, kMaxSmallValue);
    if (v && !v->empty() && v->size() < 18 && v->find_first_not_of("0123456789") == std::string::npos)
      it.pending_since = std::stoll(*v);
  }
  auto pointers = [&](const char* pattern, ParsedKey::Kind kind, std::map<std::string, std::string>& out) {
    for (const std::string& k : b_->scan(pattern)) {
      const std::optional<ParsedKey> p = KeyLayout::parse(k);
      if (!p || p->kind != kind) continue;
      const std::optional<std::string> v = b_->get(k, kMaxSmallValue);
      out[k] = v && is_hex(*v, 64) ? *v : "";
    }
  };
  pointers(KeyLayout::kNames, ParsedKey::Kind::name, c.names);
  pointers(KeyLayout::kPrefixes, ParsedKey::Kind::prefix, c.prefixes);
  return c;
}

VerifyResult Store::verify() {
  const Catalog c = catalog();
  PointerCheck fits(c);
  VerifyResult r;
  for (const auto& [seal, it] : c.seals) {
    if (it.has_entry) {
      if (!it.entry) {
        r.findings.push_back({"entry", KeyLayout::entry(seal), it.entry_error});
        continue;
      }
      try {
        get(seal, /*count_hit=*/false);
        ++r.entries_ok;
      } catch (const Error& e) {
        r.findings.push_back({"entry", KeyLayout::entry(seal), e.what()});
      }
      // Chunks the record does not name (from an interrupted put of another layout).
      size_t named = it.entry->chunks[0].size() + it.entry->chunks[1].size();
      if (it.chunk_keys.size() > named)
        r.findings.push_back({"orphan-chunks", KeyLayout::entry(seal),
                              std::to_string(it.chunk_keys.size() - named) + " chunks not in the record"});
      if (it.has_pending) r.findings.push_back({"stale-pending", KeyLayout::pending(seal), "the entry is published"});
      for (const std::string& k : it.signature_keys) {
        const std::optional<ParsedKey> p = KeyLayout::parse(k);
        std::string why;
        try {
          if (!signature(seal, p->leaf)) why = "not a valid signature of the seal by " + p->leaf;
        } catch (const Error& e) {
          why = e.what();
        }
        if (!why.empty()) r.findings.push_back({"bad-signature", k, why});
      }
    } else if (!it.chunk_keys.empty() || it.has_pending || !it.signature_keys.empty()) {
      r.findings.push_back({"orphan-chunks", KeyLayout::state(seal),
                            std::to_string(it.chunk_keys.size()) + " chunks without an entry" +
                                (it.pending_since ? " (put started at " + std::to_string(*it.pending_since) + ")"
                                                  : " (no live put)")});
    }
  }
  auto pointers = [&](const std::map<std::string, std::string>& m, const char* dangling, const char* misplaced) {
    for (const auto& [k, seal] : m) {
      auto it = c.seals.find(seal);
      std::string why;
      if (seal.empty() || it == c.seals.end() || !it->second.has_entry)
        r.findings.push_back({dangling, k, seal.empty() ? "not a seal" : "points at state " + seal + ", not stored"});
      else if (!fits.fits(k, seal, &why))
        r.findings.push_back({misplaced, k, why});
    }
  };
  pointers(c.names, "dangling-name", "misplaced-name");
  pointers(c.prefixes, "dangling-prefix", "misplaced-prefix");
  for (const Backend::Temporary& t : b_->dead_temporaries())
    r.findings.push_back({"stale-temporary", t.path,
                          "a dead put's temporary, " + std::to_string(t.age_s) + " s old (gc removes it)"});
  return r;
}

void Store::remove_state(const std::string& seal, const Catalog& c, GcResult& r) {
  for (const auto& [k, s] : c.names)
    if (s == seal) b_->remove(k), ++r.names_removed;
  for (const auto& [k, s] : c.prefixes)
    if (s == seal) b_->remove(k), ++r.prefixes_removed;
  auto it = c.seals.find(seal);
  if (it != c.seals.end() && it->second.has_entry) {
    b_->remove(KeyLayout::entry(seal));
    ++r.entries_removed;
  }
  // The rest only while no entry exists: a put that published the state again since the
  // catalog was read keeps its chunks (it re-checks them after publishing, too).
  std::vector<std::string> rest = {KeyLayout::hits(seal), KeyLayout::pending(seal)};
  size_t chunks = 0, pending = 0;
  if (it != c.seals.end()) {
    rest.insert(rest.end(), it->second.chunk_keys.begin(), it->second.chunk_keys.end());
    rest.insert(rest.end(), it->second.signature_keys.begin(), it->second.signature_keys.end());
    chunks = it->second.chunk_keys.size();
    pending = it->second.has_pending ? 1 : 0;
  }
  if (b_->remove_unless_exists(KeyLayout::entry(seal), rest)) {
    r.chunks_removed += chunks;
    r.pending_removed += pending;
  }
}

GcResult Store::remove(const std::string& ref) {
  const Catalog c = catalog();
  GcResult r;
  if (is_hex(ref, 64)) {
    auto it = c.seals.find(ref);
    if (it == c.seals.end() || !it->second.has_entry) fail_field(uri(), "state " + ref, "a stored state", "none");
    remove_state(ref, c, r);
    return r;
  }
  const std::string seal = resolve(ref);
  const size_t slash = ref.find('/');
  const std::string key = KeyLayout::name(ref.substr(0, slash), ref.substr(slash + 1));
  b_->remove(key);
  ++r.names_removed;
  bool other = false;
  for (const auto& [k, s] : c.names) other = other || (s == seal && k != key);
  // A name misplaced into another namespace is removed alone: the state it names belongs to
  // another model and is not this name's to take with it.
  std::string why;
  if (!other && PointerCheck(c).fits(key, seal, &why)) {
    Catalog rest = c;
    rest.names.erase(key);
    remove_state(seal, rest, r);
  }
  return r;
}

GcResult Store::gc(const GcOptions& o) {
  const Catalog c = catalog();
  PointerCheck fits(c);
  const int64_t now = now_s(o.now);
  GcResult r;
  struct Live {
    int64_t at;
    std::string seal;
    uint64_t bytes;
  };
  std::vector<Live> live;
  for (const auto& [seal, it] : c.seals) {
    if (it.has_entry && !it.entry) {  // a record no reader accepts
      remove_state(seal, c, r);
      continue;
    }
    if (it.has_entry) {
      if (o.older_than_s >= 0 && it.entry->stored_at < now - o.older_than_s) {
        remove_state(seal, c, r);
        continue;
      }
      live.push_back({it.entry->stored_at, seal, 2 * it.entry->manifest.payload_bytes()});
      if (it.has_pending) b_->remove(KeyLayout::pending(seal)), ++r.pending_removed;
      continue;
    }
    // No record: chunks of a put that died, unless the put is younger than the grace period.
    const bool young = it.pending_since && *it.pending_since > now - o.grace_s;
    if (!young) remove_state(seal, c, r);
  }
  std::sort(live.begin(), live.end(), [](const Live& a, const Live& b) {
    return a.at != b.at ? a.at < b.at : a.seal < b.seal;
  });
  uint64_t total = 0;
  for (const Live& l : live) total += l.bytes;
  size_t i = 0;
  for (; i < live.size() && total > o.max_bytes; ++i) {
    remove_state(live[i].seal, c, r);
    total -= live[i].bytes;
  }
  r.entries_kept = live.size() - i;
  r.bytes_kept = total;
  // Pointers at states that are gone (or were never published), or at a state they do not
  // belong with (another namespace's; another prompt's, for a prefix key).
  std::set<std::string> removed;
  for (size_t k = 0; k < i; ++k) removed.insert(live[k].seal);
  auto sweep = [&](const std::map<std::string, std::string>& m, size_t& count) {
    for (const auto& [k, seal] : m) {
      auto it = c.seals.find(seal);
      std::string why;
      const bool stored = !seal.empty() && it != c.seals.end() && it->second.entry && !removed.count(seal) &&
                          !(o.older_than_s >= 0 && it->second.entry->stored_at < now - o.older_than_s);
      if ((!stored || !fits.fits(k, seal, &why)) && b_->exists(k)) b_->remove(k), ++count;
    }
  };
  sweep(c.names, r.names_removed);
  sweep(c.prefixes, r.prefixes_removed);
  // A dead dir: put's temporaries, once older than the grace period (a live writer holds its
  // temporary's lock, so it is never listed; the age covers writers on other machines).
  for (const Backend::Temporary& t : b_->dead_temporaries())
    if (t.age_s >= o.grace_s && b_->remove_dead_temporary(t.path)) ++r.temporaries_removed;
  return r;
}

StoreStats Store::stats() {
  const Catalog c = catalog();
  StoreStats s;
  for (const auto& [seal, it] : c.seals) {
    s.chunks += it.chunk_keys.size();
    if (it.entry) {
      ++s.entries;
      s.payload_bytes += 2 * it.entry->manifest.payload_bytes();
      s.hits += it.hits.value_or(0);
    } else if (it.has_entry) {
      ++s.invalid_entries;
    } else {
      ++s.orphan_groups;
    }
  }
  s.names = c.names.size();
  s.prefix_keys = c.prefixes.size();
  return s;
}

}  // namespace ember::store
