#include "map/calibration.h"

#include <cstring>
#include <set>

#include "util/json_strict.h"
#include "util/atomic_file.h"
#include "util/byte_io.h"
#include "util/error.h"
#include "util/mapped_file.h"
#include "util/sha256.h"

namespace ember::map {
namespace {

constexpr int kMaxDim = 1 << 16;
constexpr int kMaxLayers = 1024;
constexpr int64_t kMaxRows = int64_t(1) << 24;

int get_int(const nlohmann::json& j, const char* key, int lo, int hi, const std::string& where,
            const std::string& prefix) {
  if (!j.contains(key) || !j[key].is_number_integer())
    fail_field(where, prefix + key, "an integer", j.contains(key) ? j[key].dump() : "missing");
  const int64_t v = j[key].get<int64_t>();
  if (v < lo || v > hi)
    fail_field(where, prefix + key, "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]",
               std::to_string(v));
  return int(v);
}

std::string get_str(const nlohmann::json& j, const char* key, const std::string& where,
                    const std::string& prefix) {
  if (!j.contains(key) || !j[key].is_string())
    fail_field(where, prefix + key, "a string", j.contains(key) ? j[key].dump() : "missing");
  return j[key].get<std::string>();
}

// Per-block array sizes, in payload order.
struct BlockSizes {
  size_t src_kv, tgt_kv, src_res, tgt_res;
  size_t total() const { return 2 * src_kv + 2 * tgt_kv + src_res + tgt_res; }
};

BlockSizes sizes_for(const CalibrationSet& s, int n) {
  BlockSizes z;
  z.src_kv = size_t(s.source.n_layers) * s.source.n_kv_heads * size_t(n) * s.source.head_dim;
  z.tgt_kv = size_t(s.target.n_layers) * s.target.n_kv_heads * size_t(n) * s.target.head_dim;
  z.src_res = size_t(s.source.n_layers + 1) * size_t(n) * s.source.n_embd;
  z.tgt_res = size_t(s.target.n_layers + 1) * size_t(n) * s.target.n_embd;
  return z;
}

}  // namespace

nlohmann::json ModelGeometry::to_json() const {
  return {{"identity", identity}, {"arch", arch},         {"n_layers", n_layers},
          {"n_kv_heads", n_kv_heads}, {"head_dim", head_dim}, {"n_embd", n_embd}};
}

ModelGeometry ModelGeometry::from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) fail_field(where, "model", "an object", j.type_name());
  ModelGeometry g;
  g.identity = get_str(j, "identity", where, "model.");
  g.arch = get_str(j, "arch", where, "model.");
  g.n_layers = get_int(j, "n_layers", 1, kMaxLayers, where, "model.");
  g.n_kv_heads = get_int(j, "n_kv_heads", 1, kMaxDim, where, "model.");
  g.head_dim = get_int(j, "head_dim", 1, kMaxDim, where, "model.");
  g.n_embd = get_int(j, "n_embd", 1, kMaxDim, where, "model.");
  return g;
}

CalibBlock CalibrationSet::new_block(const std::string& hash, SplitPart part, int n_rows) const {
  CalibBlock b;
  b.prompt_hash = hash;
  b.part = part;
  b.n_rows = n_rows;
  const BlockSizes z = sizes_for(*this, n_rows);
  b.src_k.assign(z.src_kv, 0.f);
  b.src_v.assign(z.src_kv, 0.f);
  b.tgt_k.assign(z.tgt_kv, 0.f);
  b.tgt_v.assign(z.tgt_kv, 0.f);
  b.src_res.assign(z.src_res, 0.f);
  b.tgt_res.assign(z.tgt_res, 0.f);
  return b;
}

const float* CalibrationSet::src_k(const CalibBlock& b, int layer, int head) const {
  return b.src_k.data() + (size_t(layer) * source.n_kv_heads + head) * b.n_rows * source.head_dim;
}
const float* CalibrationSet::src_v(const CalibBlock& b, int layer, int head) const {
  return b.src_v.data() + (size_t(layer) * source.n_kv_heads + head) * b.n_rows * source.head_dim;
}
const float* CalibrationSet::tgt_k(const CalibBlock& b, int layer, int head) const {
  return b.tgt_k.data() + (size_t(layer) * target.n_kv_heads + head) * b.n_rows * target.head_dim;
}
const float* CalibrationSet::tgt_v(const CalibBlock& b, int layer, int head) const {
  return b.tgt_v.data() + (size_t(layer) * target.n_kv_heads + head) * b.n_rows * target.head_dim;
}
const float* CalibrationSet::src_res(const CalibBlock& b, int boundary) const {
  return b.src_res.data() + size_t(boundary) * b.n_rows * source.n_embd;
}
const float* CalibrationSet::tgt_res(const CalibBlock& b, int boundary) const {
  return b.tgt_res.data() + size_t(boundary) * b.n_rows * target.n_embd;
}

void CalibrationSet::validate(const std::string& where) const {
  if (source.n_layers <= 0 || target.n_layers <= 0 || source.head_dim <= 0 ||
      target.head_dim <= 0 || source.n_kv_heads <= 0 || source.n_embd <= 0 ||
      target.n_embd <= 0)
    fail_field(where, "geometry", "positive sizes", "a zero or negative size");
  if (source.n_layers != target.n_layers)
    fail_field(where, "target.n_layers", std::to_string(source.n_layers) + " (as the source)",
               std::to_string(target.n_layers));
  if (source.n_kv_heads != target.n_kv_heads)
    fail_field(where, "target.n_kv_heads", std::to_string(source.n_kv_heads) + " (as the source)",
               std::to_string(target.n_kv_heads));
  if (shared_layers < 0 || shared_layers > source.n_layers)
    fail_field(where, "shared_layers", "in [0, n_layers]", std::to_string(shared_layers));
  std::set<std::string> seen;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const CalibBlock& b = blocks[i];
    const std::string field = "blocks[" + std::to_string(i) + "]";
    if (b.n_rows <= 0 || b.n_rows > kMaxRows)
      fail_field(where, field + ".rows", "in [1, 2^24]", std::to_string(b.n_rows));
    if (!seen.insert(b.prompt_hash).second)
      fail_field(where, field + ".prompt_hash", "each prompt once", "duplicate " + b.prompt_hash);
    const bool in_eval = split.is_eval(b.prompt_hash), in_calib = split.is_calib(b.prompt_hash);
    if (b.part == SplitPart::calib && !in_calib)
      fail_field(where, field + ".part", in_eval ? "eval (the split says so)" : "a prompt of the split",
                 "calib for prompt " + b.prompt_hash);
    if (b.part == SplitPart::eval && !in_eval)
      fail_field(where, field + ".part", in_calib ? "calib (the split says so)" : "a prompt of the split",
                 "eval for prompt " + b.prompt_hash);
    const BlockSizes z = sizes_for(*this, b.n_rows);
    if (b.src_k.size() != z.src_kv || b.src_v.size() != z.src_kv || b.tgt_k.size() != z.tgt_kv ||
        b.tgt_v.size() != z.tgt_kv || b.src_res.size() != z.src_res || b.tgt_res.size() != z.tgt_res)
      fail_field(where, field, "arrays sized by the geometry", "mismatched array sizes");
  }
}

void CalibrationSet::write(const std::string& dir, bool force) const {
  validate(dir);
  AtomicDirectory out(dir, force);
  nlohmann::json blocks_json = nlohmann::json::array();
  {
    auto file = out.create("rows.f32le");
    HashingSink tee(&file->sink());
    for (const CalibBlock& b : blocks) {
      blocks_json.push_back({{"prompt_hash", b.prompt_hash},
                             {"part", split_part_name(b.part)},
                             {"rows", b.n_rows},
                             {"offset", tee.n_bytes()}});
      for (const auto* v : {&b.src_k, &b.src_v, &b.tgt_k, &b.tgt_v, &b.src_res, &b.tgt_res})
        tee.write(v->data(), v->size() * sizeof(float));
    }
    const uint64_t n = tee.n_bytes();
    const std::string sha = to_hex(tee.finish());
    file->commit();
    nlohmann::json m;
    m["format"] = kCalibrationFormat;
    m["source"] = source.to_json();
    m["target"] = target.to_json();
    m["tokenizer_identity"] = tokenizer_identity;
    m["shared_layers"] = shared_layers;
    m["key_state"] = kKeyState;
    m["value_state"] = kValueState;
    m["split"] = split.to_json();
    m["blocks"] = blocks_json;
    m["payload"] = {{"file", "rows.f32le"}, {"bytes", n}, {"sha256", sha}};
    auto mf = out.create("manifest.json");
    mf->sink().write(m.dump(2) + "\n");
    mf->commit();
  }
  out.commit();
}

CalibrationSet CalibrationSet::read(const std::string& dir) {
  const std::string mpath = dir + "/manifest.json";
  const nlohmann::json m = ember::parse_json_strict(read_file(mpath, size_t(1) << 28), mpath);
  if (!m.is_object()) fail_field(mpath, "manifest", "an object", m.type_name());
  const std::string fmt = get_str(m, "format", mpath, "");
  if (fmt != kCalibrationFormat) fail_field(mpath, "format", kCalibrationFormat, fmt);
  CalibrationSet s;
  if (!m.contains("source") || !m.contains("target")) fail_field(mpath, "source/target", "objects", "missing");
  s.source = ModelGeometry::from_json(m["source"], mpath);
  s.target = ModelGeometry::from_json(m["target"], mpath);
  s.tokenizer_identity = get_str(m, "tokenizer_identity", mpath, "");
  s.shared_layers = get_int(m, "shared_layers", 0, kMaxLayers, mpath, "");
  const std::string ks = get_str(m, "key_state", mpath, "");
  if (ks != kKeyState) fail_field(mpath, "key_state", kKeyState, ks);
  const std::string vs = get_str(m, "value_state", mpath, "");
  if (vs != kValueState) fail_field(mpath, "value_state", kValueState, vs);
  if (!m.contains("split")) fail_field(mpath, "split", "an object", "missing");
  s.split = PromptSplit::from_json(m["split"], mpath);
  if (!m.contains("payload") || !m["payload"].is_object())
    fail_field(mpath, "payload", "an object", "missing");
  const auto& p = m["payload"];
  if (get_str(p, "file", mpath, "payload.") != "rows.f32le")
    fail_field(mpath, "payload.file", "rows.f32le", p["file"].dump());
  if (!p.contains("bytes") || !p["bytes"].is_number_unsigned())
    fail_field(mpath, "payload.bytes", "an unsigned integer", "missing");
  const uint64_t bytes = p["bytes"].get<uint64_t>();
  const std::string sha = get_str(p, "sha256", mpath, "payload.");
  const std::string ppath = dir + "/rows.f32le";
  const auto mapping = MappedFile::open(ppath);
  const MappedFile& data = *mapping;
  if (data.size() != bytes)
    fail_field(ppath, "size", std::to_string(bytes) + " bytes", std::to_string(data.size()) + " bytes");
  const std::string found = sha256_hex(data.data(), data.size());
  if (found != sha) fail_field(ppath, "sha256", sha, found);
  if (!m.contains("blocks") || !m["blocks"].is_array())
    fail_field(mpath, "blocks", "an array", "missing");
  ByteReader r(data.data(), data.size(), ppath);
  for (size_t i = 0; i < m["blocks"].size(); ++i) {
    const auto& bj = m["blocks"][i];
    const std::string field = "blocks[" + std::to_string(i) + "].";
    const std::string hash = get_str(bj, "prompt_hash", mpath, field);
    const std::string part = get_str(bj, "part", mpath, field);
    if (part != "calib" && part != "eval") fail_field(mpath, field + "part", "calib or eval", part);
    const int rows = get_int(bj, "rows", 1, int(kMaxRows), mpath, field);
    if (!bj.contains("offset") || !bj["offset"].is_number_unsigned() ||
        bj["offset"].get<uint64_t>() != r.offset())
      fail_field(mpath, field + "offset", std::to_string(r.offset()),
                 bj.contains("offset") ? bj["offset"].dump() : "missing");
    const BlockSizes z = sizes_for(s, rows);
    if (z.total() * sizeof(float) > r.remaining())
      fail_field(ppath, field + "rows", "within the payload", "past its end");
    CalibBlock b = s.new_block(hash, part == "calib" ? SplitPart::calib : SplitPart::eval, rows);
    for (auto* v : {&b.src_k, &b.src_v, &b.tgt_k, &b.tgt_v, &b.src_res, &b.tgt_res})
      std::memcpy(v->data(), r.take(v->size() * sizeof(float), field + "data"), v->size() * sizeof(float));
    s.blocks.push_back(std::move(b));
  }
  if (r.remaining() != 0)
    fail_field(ppath, "size", std::to_string(r.offset()) + " bytes (sum of blocks)",
               std::to_string(data.size()) + " bytes");
  s.validate(mpath);
  return s;
}

}  // namespace ember::map
