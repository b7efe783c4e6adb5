#include "kv/kvc1.h"

#include <algorithm>
#include <cstring>

#include "util/atomic_file.h"
#include "util/json_strict.h"

namespace ember::kv {

using nlohmann::json;

const char* kvc1_dtype_name(Kvc1Dtype d) {
  switch (d) {
    case Kvc1Dtype::f16: return "f16";
    case Kvc1Dtype::bf16: return "bf16";
    case Kvc1Dtype::f32: return "f32";
  }
  return "?";
}

uint64_t kvc1_dtype_size(Kvc1Dtype d) { return d == Kvc1Dtype::f32 ? 4 : 2; }

Kvc1Dtype parse_kvc1_dtype(const std::string& name, const std::string& where, const std::string& field) {
  if (name == "f16") return Kvc1Dtype::f16;
  if (name == "bf16") return Kvc1Dtype::bf16;
  if (name == "f32") return Kvc1Dtype::f32;
  throw Kvc1Error(Kvc1Reject::unknown_dtype,
                  where + ": [unknown-dtype] " + field + ": expected f16|bf16|f32, found \"" + name + "\"");
}

const char* kvc1_kind_name(Kvc1Kind k) {
  for (const auto& info : kKvc1Kinds)
    if (info.kind == k) return info.name;
  return "?";
}

std::string kvc1_kind_names() {
  std::string s;
  for (const auto& info : kKvc1Kinds) s += (s.empty() ? "" : "|") + std::string(info.name);
  return s;
}

namespace {

std::string kind_codes() {
  std::string s;
  for (const auto& info : kKvc1Kinds)
    s += (s.empty() ? "" : ", ") + std::to_string(unsigned(info.kind)) + " (" + info.name + ")";
  return s;
}

}  // namespace

const char* kvc1_reject_name(Kvc1Reject r) {
  switch (r) {
    case Kvc1Reject::truncated: return "truncated";
    case Kvc1Reject::trailing_bytes: return "trailing-bytes";
    case Kvc1Reject::bad_magic: return "bad-magic";
    case Kvc1Reject::unsupported_version: return "unsupported-version";
    case Kvc1Reject::unknown_flag: return "unknown-flag";
    case Kvc1Reject::unknown_kind: return "unknown-kind";
    case Kvc1Reject::nonzero_reserved: return "nonzero-reserved";
    case Kvc1Reject::bad_header: return "bad-header";
    case Kvc1Reject::non_canonical_header: return "non-canonical-header";
    case Kvc1Reject::bad_table: return "bad-table";
    case Kvc1Reject::unknown_dtype: return "unknown-dtype";
    case Kvc1Reject::bad_length: return "bad-length";
    case Kvc1Reject::misaligned_offset: return "misaligned-offset";
    case Kvc1Reject::offset_out_of_range: return "offset-out-of-range";
    case Kvc1Reject::overlapping_tensors: return "overlapping-tensors";
    case Kvc1Reject::non_canonical_layout: return "non-canonical-layout";
    case Kvc1Reject::nonzero_padding: return "nonzero-padding";
    case Kvc1Reject::tensor_hash_mismatch: return "tensor-hash-mismatch";
    case Kvc1Reject::state_hash_mismatch: return "state-hash-mismatch";
    case Kvc1Reject::trailer_hash_mismatch: return "trailer-hash-mismatch";
  }
  return "?";
}

namespace {

[[noreturn]] void reject(Kvc1Reject code, const std::string& where, const std::string& field,
                         const std::string& expected, const std::string& found) {
  throw Kvc1Error(code, where + ": [" + kvc1_reject_name(code) + "] " + field + ": expected " +
                            expected + ", found " + found);
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

std::string tensor_name(uint64_t i) {
  return "tensor[" + std::to_string(i) + "] (layer " + std::to_string(i / 2) + (i % 2 ? " V)" : " K)");
}

// What the header fixes about the table: one (K, V) pair per layer of this shape and dtype.
struct TableSpec {
  uint64_t layers = 0;
  uint64_t shape[3] = {0, 0, 0};
  Kvc1Dtype dtype = Kvc1Dtype::f16;
};

uint64_t geometry_field(const json& geo, const char* key, uint64_t lo, uint64_t hi, const std::string& where) {
  const std::string field = std::string("state.geometry.") + key;
  // A parsed header holds non-negative integers as unsigned; one built in memory may hold
  // them as signed: accept both, refuse negatives and non-integers.
  if (!geo.contains(key) || !geo[key].is_number_integer() ||
      (!geo[key].is_number_unsigned() && geo[key].get<int64_t>() < 0))
    reject(Kvc1Reject::bad_header, where, field, "an unsigned integer",
           geo.contains(key) ? geo[key].dump() : "no field");
  const uint64_t v = geo[key].get<uint64_t>();
  if (v < lo || v > hi)
    reject(Kvc1Reject::bad_header, where, field, std::to_string(lo) + ".." + std::to_string(hi), std::to_string(v));
  return v;
}

// Checks the container-level header fields; the state's own semantics are the snapshot
// manifest's (kvc1_snapshot.cpp checks them when a state is loaded).
TableSpec check_header(const json& h, const std::string& where, Kvc1Kind* kind) {
  if (!h.is_object()) reject(Kvc1Reject::bad_header, where, "header", "a JSON object", h.type_name());
  for (const auto& [k, v] : h.items())
    if (k != "artifact" && k != "format" && k != "state")
      reject(Kvc1Reject::bad_header, where, "header." + k, "only artifact, format, state", "unknown field");
  for (const char* k : {"artifact", "format", "state"})
    if (!h.contains(k)) reject(Kvc1Reject::bad_header, where, std::string("header.") + k, "a field", "none");
  if (h["format"] != kKvc1Format)
    reject(Kvc1Reject::bad_header, where, "format", std::string("\"") + kKvc1Format + "\"", h["format"].dump());

  // artifact is {"kind": K} and nothing else: what a kind carries beyond its name (a mapped
  // cache's mapper hash, source and layer roles) is in its state, under the state's seal.
  const json& a = h["artifact"];
  if (!a.is_object() || !a.contains("kind") || !a["kind"].is_string())
    reject(Kvc1Reject::bad_header, where, "artifact.kind", kvc1_kind_names(), a.dump());
  const std::string name = a["kind"].get<std::string>();
  const Kvc1KindInfo* info = nullptr;
  for (const auto& k : kKvc1Kinds)
    if (name == k.name) info = &k;
  if (!info) reject(Kvc1Reject::bad_header, where, "artifact.kind", kvc1_kind_names(), "\"" + name + "\"");
  if (a.size() != 1)
    reject(Kvc1Reject::bad_header, where, "artifact", "only {\"kind\":\"" + name + "\"}", a.dump());
  if (kind) *kind = info->kind;

  const json& s = h["state"];
  if (!s.is_object() || !s.contains("geometry") || !s["geometry"].is_object())
    reject(Kvc1Reject::bad_header, where, "state.geometry", "an object", s.is_object() ? "none" : s.type_name());
  const json& g = s["geometry"];
  TableSpec t;
  t.layers = geometry_field(g, "layers", 1, kKvc1MaxTensors / 2, where);
  t.shape[0] = geometry_field(g, "kv_heads", 1, 1024, where);
  t.shape[1] = geometry_field(g, "positions", 1, uint64_t(1) << 22, where);
  t.shape[2] = geometry_field(g, "head_dim", 1, 4096, where);
  if (!s.contains("representation") || !s["representation"].is_object() ||
      !s["representation"].contains("dtype") || !s["representation"]["dtype"].is_string())
    reject(Kvc1Reject::bad_header, where, "state.representation.dtype", "f16|bf16|f32", "none");
  t.dtype = parse_kvc1_dtype(s["representation"]["dtype"].get<std::string>(), where, "state.representation.dtype");
  return t;
}

uint64_t tensor_length(const TableSpec& t) {
  return t.shape[0] * t.shape[1] * t.shape[2] * kvc1_dtype_size(t.dtype);
}

// A sink that forwards and hashes, used to check each payload's second emission.
struct TeeSink final : ByteSink {
  ByteSink& a;
  Sha256 h;
  explicit TeeSink(ByteSink& out) : a(out) {}
  void write(const void* d, size_t n) override {
    h.update(d, n);
    a.write(d, n);
    n_bytes_ += n;
  }
  using ByteSink::write;
};

}  // namespace

std::vector<uint64_t> kvc1_layout(uint64_t header_bytes, const std::vector<uint64_t>& lengths,
                                  uint64_t* file_length) {
  const uint64_t table = align_up(kKvc1PreambleBytes + header_bytes, 8);
  uint64_t pos = align_up(table + kKvc1EntryBytes * lengths.size(), kKvc1Alignment);
  std::vector<uint64_t> offsets;
  offsets.reserve(lengths.size());
  for (uint64_t len : lengths) {
    offsets.push_back(pos);
    pos = align_up(pos + len, kKvc1Alignment);
  }
  if (file_length) *file_length = pos + 32;
  return offsets;
}

Digest write_kvc1(ByteSink& out, const json& header, const std::vector<Kvc1TensorSource>& tensors,
                  const std::string& where) {
  Kvc1Kind kind = Kvc1Kind::native;
  const TableSpec spec = check_header(header, where, &kind);
  if (tensors.size() != 2 * spec.layers)
    fail_field(where, "tensors", std::to_string(2 * spec.layers) + " (K and V per layer)", std::to_string(tensors.size()));
  const uint64_t length = tensor_length(spec);
  // Pass 1: hash every tensor from its source (nothing buffered).
  std::vector<Digest> digests;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Kvc1TensorSource& t = tensors[i];
    if (t.layer != i / 2 || t.is_value != (i % 2 == 1) || t.dtype != spec.dtype ||
        !std::equal(t.shape, t.shape + 3, spec.shape))
      fail_field(where, tensor_name(i), "the layer, kind, dtype and shape the header states", "a different tensor");
    HashingSink h;
    t.emit(h);
    if (h.n_bytes() != length)
      fail_field(where, tensor_name(i) + " bytes", std::to_string(length), std::to_string(h.n_bytes()));
    digests.push_back(h.finish());
  }
  const std::string text = ember::canonical_json(header);
  uint64_t file_length = 0;
  const auto offsets = kvc1_layout(text.size(), std::vector<uint64_t>(tensors.size(), length), &file_length);

  HashingSink body(&out);  // the trailer covers everything written through `body`
  body.write(kKvc1Magic, 4);
  body.write_le<uint16_t>(kKvc1Version);
  body.write_le<uint16_t>(0);
  body.write_le<uint64_t>(file_length);
  body.write_le<uint64_t>(text.size());
  body.write_le<uint32_t>(uint32_t(tensors.size()));
  body.write_le<uint8_t>(uint8_t(kind));
  for (int i = 0; i < 3; ++i) body.write_le<uint8_t>(0);
  body.write(text);
  body.pad_to(8);
  for (size_t i = 0; i < tensors.size(); ++i) {
    body.write_le<uint32_t>(tensors[i].layer);
    body.write_le<uint8_t>(tensors[i].is_value ? 1 : 0);
    body.write_le<uint8_t>(uint8_t(spec.dtype));
    body.write_le<uint16_t>(0);
    for (uint64_t d : spec.shape) body.write_le<uint64_t>(d);
    body.write_le<uint64_t>(offsets[i]);
    body.write_le<uint64_t>(length);
    body.write(digests[i].data(), digests[i].size());
  }
  // Pass 2: the payloads, each re-hashed on the way out and compared with pass 1.
  for (size_t i = 0; i < tensors.size(); ++i) {
    body.pad_to(kKvc1Alignment);
    EMBER_CHECK(body.n_bytes() == offsets[i]);
    TeeSink tee(body);
    tensors[i].emit(tee);
    if (tee.n_bytes() != length || tee.h.finish() != digests[i])
      fail(where, tensor_name(i) + ": the source changed between the hash and the write passes; nothing written");
  }
  body.pad_to(kKvc1Alignment);
  const Digest trailer = body.finish();
  out.write(trailer.data(), trailer.size());
  EMBER_CHECK(body.n_bytes() + 32 == file_length);
  return trailer;
}

Digest write_kvc1_file(const std::string& path, const json& header,
                       const std::vector<Kvc1TensorSource>& tensors, bool force) {
  AtomicFile file(path, force);
  const Digest d = write_kvc1(file.sink(), header, tensors, path);
  file.commit();
  return d;
}

Kvc1File Kvc1File::open(const std::string& path) {
  Kvc1File f;
  f.path_ = path;
  f.mapping_ = MappedFile::open(path);
  f.data_ = f.mapping_->data();
  f.size_ = f.mapping_->size();
  f.verify_all();
  return f;
}

Kvc1File Kvc1File::parse(std::shared_ptr<const std::vector<uint8_t>> bytes, std::string name) {
  Kvc1File f;
  f.path_ = std::move(name);
  f.buffer_ = std::move(bytes);
  f.data_ = f.buffer_->data();
  f.size_ = f.buffer_->size();
  f.verify_all();
  return f;
}

void Kvc1File::verify_all() {
  const std::string& w = path_;
  using R = Kvc1Reject;
  if (size_ < kKvc1PreambleBytes + 32)
    reject(R::truncated, w, "file size", ">= " + std::to_string(kKvc1PreambleBytes + 32), std::to_string(size_));
  ByteReader in(data_, size_, w);
  const uint8_t* magic = in.take(4, "magic");
  if (std::memcmp(magic, kKvc1Magic, 4) != 0)
    reject(R::bad_magic, w, "magic", "\"KVC1\"", "bytes " + to_hex(magic, 4));
  const auto version = in.read_le<uint16_t>("version");
  if (version != kKvc1Version)
    reject(R::unsupported_version, w, "version",
           std::to_string(kKvc1Version) + (version == 1 ? " (version 1 had no kind byte: repack the snapshot)" : ""),
           std::to_string(version));
  const auto flags = in.read_le<uint16_t>("flags");
  if (flags != 0) reject(R::unknown_flag, w, "flags", "0 (no flag is defined in version 2)", std::to_string(flags));
  const auto file_length = in.read_le<uint64_t>("file_length");
  const auto header_length = in.read_le<uint64_t>("header_length");
  const auto n_tensors = in.read_le<uint32_t>("n_tensors");
  const auto kind_code = in.read_le<uint8_t>("kind");
  bool known_kind = false;
  for (const auto& k : kKvc1Kinds) known_kind = known_kind || uint8_t(k.kind) == kind_code;
  if (!known_kind) reject(R::unknown_kind, w, "kind", kind_codes(), std::to_string(kind_code));
  kind_ = Kvc1Kind(kind_code);
  const uint8_t* reserved = in.take(3, "reserved");
  if (reserved[0] | reserved[1] | reserved[2])
    reject(R::nonzero_reserved, w, "reserved", "0", "bytes " + to_hex(reserved, 3));
  if (size_ < file_length)
    reject(R::truncated, w, "file size", std::to_string(file_length) + " bytes (file_length)", std::to_string(size_));
  if (size_ > file_length)
    reject(R::trailing_bytes, w, "file size", std::to_string(file_length) + " bytes (file_length)",
           std::to_string(size_) + " (" + std::to_string(size_ - file_length) + " trailing bytes)");
  const uint64_t body_end = size_ - 32;  // the trailer's offset
  if (header_length < 2 || header_length > kKvc1MaxHeaderBytes)
    reject(R::bad_header, w, "header_length", "2.." + std::to_string(kKvc1MaxHeaderBytes), std::to_string(header_length));
  if (header_length > body_end - kKvc1PreambleBytes)
    reject(R::truncated, w, "header", std::to_string(header_length) + " bytes", std::to_string(body_end - kKvc1PreambleBytes) + " before the trailer");

  const std::string_view text(reinterpret_cast<const char*>(data_ + kKvc1PreambleBytes), header_length);
  try {
    header_ = ember::parse_json_strict(text, w + ": [bad-header] header", 64, kKvc1MaxHeaderValues);
  } catch (const Kvc1Error&) {
    throw;
  } catch (const Error& e) {
    throw Kvc1Error(R::bad_header, e.what());
  }
  if (ember::canonical_json(header_) != text)
    reject(R::non_canonical_header, w, "header", "canonical JSON (sorted keys, no whitespace)",
           "other bytes of the same value");
  Kvc1Kind header_kind = Kvc1Kind::native;
  const TableSpec spec = check_header(header_, w, &header_kind);
  if (header_kind != kind_)
    reject(R::unknown_kind, w, "kind", std::to_string(unsigned(header_kind)) + " (artifact.kind \"" +
           kvc1_kind_name(header_kind) + "\")", std::to_string(unsigned(kind_)) + " (" + kvc1_kind_name(kind_) + ")");

  if (n_tensors != 2 * spec.layers)
    reject(R::bad_table, w, "n_tensors", std::to_string(2 * spec.layers) + " (2 x state.geometry.layers)", std::to_string(n_tensors));
  const uint64_t table = align_up(kKvc1PreambleBytes + header_length, 8);
  const uint64_t table_end = table + kKvc1EntryBytes * n_tensors;
  if (table_end > body_end)
    reject(R::truncated, w, "tensor table", "end <= " + std::to_string(body_end), std::to_string(table_end));
  const uint64_t payload_start = align_up(table_end, kKvc1Alignment);
  const uint64_t length = tensor_length(spec);

  in.seek(table, "tensor table");
  tensors_.resize(n_tensors);
  for (uint32_t i = 0; i < n_tensors; ++i) {
    Kvc1TensorInfo& t = tensors_[i];
    const std::string name = tensor_name(i);
    t.layer = in.read_le<uint32_t>("layer");
    const auto kind = in.read_le<uint8_t>("kind");
    const auto dtype = in.read_le<uint8_t>("dtype");
    const auto res = in.read_le<uint16_t>("reserved");
    for (auto& d : t.shape) d = in.read_le<uint64_t>("shape");
    t.offset = in.read_le<uint64_t>("offset");
    t.length = in.read_le<uint64_t>("length");
    std::memcpy(t.sha256.data(), in.take(32, "sha256"), 32);
    if (res != 0) reject(R::nonzero_reserved, w, name + ".reserved", "0", std::to_string(res));
    if (dtype < 1 || dtype > 3) reject(R::unknown_dtype, w, name + ".dtype", "1 (f16), 2 (bf16) or 3 (f32)", std::to_string(dtype));
    t.dtype = Kvc1Dtype(dtype);
    if (t.dtype != spec.dtype)
      reject(R::unknown_dtype, w, name + ".dtype", std::string(kvc1_dtype_name(spec.dtype)) + " (the header's)", kvc1_dtype_name(t.dtype));
    if (t.layer != i / 2 || kind != i % 2)
      reject(R::bad_table, w, name + ".layer/kind", std::to_string(i / 2) + (i % 2 ? "/V" : "/K"),
             std::to_string(t.layer) + "/" + (kind == 0 ? "K" : kind == 1 ? "V" : std::to_string(kind)));
    t.is_value = kind == 1;
    if (!std::equal(t.shape, t.shape + 3, spec.shape))
      reject(R::bad_table, w, name + ".shape", "[" + std::to_string(spec.shape[0]) + "," + std::to_string(spec.shape[1]) + "," +
             std::to_string(spec.shape[2]) + "]", "[" + std::to_string(t.shape[0]) + "," + std::to_string(t.shape[1]) + "," +
             std::to_string(t.shape[2]) + "]");
    if (t.length != length) reject(R::bad_length, w, name + ".length", std::to_string(length), std::to_string(t.length));
    if (t.offset % kKvc1Alignment != 0)
      reject(R::misaligned_offset, w, name + ".offset", "a multiple of 64", std::to_string(t.offset));
    if (t.offset < payload_start || t.offset > body_end || t.length > body_end - t.offset)
      reject(R::offset_out_of_range, w, name + ".offset", "a payload inside [" + std::to_string(payload_start) + ", " +
             std::to_string(body_end) + ")", "[" + std::to_string(t.offset) + ", " + std::to_string(t.offset + t.length) + ")");
  }
  std::vector<size_t> order(n_tensors);
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return tensors_[a].offset < tensors_[b].offset; });
  for (size_t k = 1; k < order.size(); ++k) {
    const auto& prev = tensors_[order[k - 1]];
    const auto& cur = tensors_[order[k]];
    if (cur.offset < prev.offset + prev.length)
      reject(R::overlapping_tensors, w, tensor_name(order[k]) + ".offset",
             ">= " + std::to_string(prev.offset + prev.length) + " (end of " + tensor_name(order[k - 1]) + ")",
             std::to_string(cur.offset));
  }
  uint64_t canonical_length = 0;
  const auto canonical = kvc1_layout(header_length, std::vector<uint64_t>(n_tensors, length), &canonical_length);
  for (uint32_t i = 0; i < n_tensors; ++i)
    if (tensors_[i].offset != canonical[i])
      reject(R::non_canonical_layout, w, tensor_name(i) + ".offset", std::to_string(canonical[i]), std::to_string(tensors_[i].offset));
  if (file_length != canonical_length)
    reject(R::non_canonical_layout, w, "file_length", std::to_string(canonical_length), std::to_string(file_length));

  // Padding: everything between the regions above must be zero.
  auto zeros = [&](uint64_t from, uint64_t to, const std::string& what) {
    for (uint64_t p = from; p < to; ++p)
      if (data_[p] != 0) reject(R::nonzero_padding, w, what, "zero bytes", "byte " + std::to_string(data_[p]) + " at offset " + std::to_string(p));
  };
  zeros(kKvc1PreambleBytes + header_length, table, "padding after the header");
  zeros(table_end, payload_start, "padding after the tensor table");
  for (uint32_t i = 0; i < n_tensors; ++i)
    zeros(tensors_[i].offset + length, i + 1 < n_tensors ? tensors_[i + 1].offset : body_end, "padding after " + tensor_name(i));

  // Hashes: one pass over the payloads feeds both the tensor hashes and the trailer hash.
  Sha256 all;
  all.update(data_, payload_start);
  for (uint32_t i = 0; i < n_tensors; ++i) {
    const uint64_t end = i + 1 < n_tensors ? tensors_[i + 1].offset : body_end;
    const Digest d = [&] {
      Sha256 h;
      h.update(data_ + tensors_[i].offset, length);
      return h.finish();
    }();
    all.update(data_ + tensors_[i].offset, end - tensors_[i].offset);
    if (d != tensors_[i].sha256)
      reject(R::tensor_hash_mismatch, w, tensor_name(i) + ".sha256", to_hex(tensors_[i].sha256), to_hex(d));
  }
  std::memcpy(trailer_.data(), data_ + body_end, 32);
  const Digest d = all.finish();
  if (d != trailer_) reject(R::trailer_hash_mismatch, w, "trailer", to_hex(d) + " (SHA-256 of the file before it)", to_hex(trailer_));
}

}  // namespace ember::kv
