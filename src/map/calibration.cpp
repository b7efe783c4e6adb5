#include "map/calibration.h"

#include <cstring>
#include <set>

#include "util/json_fields.h"
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

ModelGeometry ModelGeometry::from_json(StrictObject o) {
  ModelGeometry g;
  g.identity = o.string("identity", 128);
  g.arch = o.string("arch", 64);
  g.n_layers = int(o.integer("n_layers", 1, kMaxLayers));
  g.n_kv_heads = int(o.integer("n_kv_heads", 1, kMaxDim));
  g.head_dim = int(o.integer("head_dim", 1, kMaxDim));
  g.n_embd = int(o.integer("n_embd", 1, kMaxDim));
  o.done();
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
  const std::string text = read_file(mpath, size_t(1) << 28);
  const std::string ppath = dir + "/rows.f32le";
  const auto mapping = MappedFile::open(ppath);
  return parse(text, mapping->data(), mapping->size(), mpath, ppath);
}

CalibrationSet CalibrationSet::parse(const std::string& manifest_text, const uint8_t* payload,
                                     size_t payload_size, const std::string& mpath,
                                     const std::string& ppath) {
  const nlohmann::json m = ember::parse_json_strict(manifest_text, mpath);
  StrictObject top(m, "", mpath);
  top.expect_string("format", kCalibrationFormat);
  CalibrationSet s;
  s.source = ModelGeometry::from_json(top.object("source"));
  s.target = ModelGeometry::from_json(top.object("target"));
  s.tokenizer_identity = top.string("tokenizer_identity", 128);
  s.shared_layers = int(top.integer("shared_layers", 0, kMaxLayers));
  top.expect_string("key_state", kKeyState);
  top.expect_string("value_state", kValueState);
  s.split = PromptSplit::from_json(top.object("split"));
  uint64_t bytes = 0;
  std::string sha;
  {
    StrictObject p = top.object("payload");
    p.expect_string("file", "rows.f32le");
    bytes = p.unsigned_integer("bytes", UINT64_MAX);
    sha = p.string("sha256", 128);
    p.done();
  }
  if (payload_size != bytes)
    fail_field(ppath, "size", std::to_string(bytes) + " bytes", std::to_string(payload_size) + " bytes");
  const std::string found = sha256_hex(payload, payload_size);
  if (found != sha) fail_field(ppath, "sha256", sha, found);
  const nlohmann::json& blocks = top.array("blocks");
  top.done();
  ByteReader r(payload, payload_size, ppath);
  for (size_t i = 0; i < blocks.size(); ++i) {
    StrictObject bj = top.object_at("blocks", blocks, i);
    const std::string hash = bj.string("prompt_hash", 128);
    const std::string part = bj.string("part", 16);
    if (part != "calib" && part != "eval") fail_field(mpath, bj.field("part"), "calib or eval", part);
    const int rows = int(bj.integer("rows", 1, kMaxRows));
    const uint64_t offset = bj.unsigned_integer("offset", UINT64_MAX);
    if (offset != r.offset())
      fail_field(mpath, bj.field("offset"), std::to_string(r.offset()), std::to_string(offset));
    bj.done();
    const BlockSizes z = sizes_for(s, rows);
    if (z.total() * sizeof(float) > r.remaining())
      fail_field(ppath, bj.field("rows"), "within the payload", "past its end");
    CalibBlock b = s.new_block(hash, part == "calib" ? SplitPart::calib : SplitPart::eval, rows);
    for (auto* v : {&b.src_k, &b.src_v, &b.tgt_k, &b.tgt_v, &b.src_res, &b.tgt_res})
      std::memcpy(v->data(), r.take(v->size() * sizeof(float), bj.path() + ".data"), v->size() * sizeof(float));
    s.blocks.push_back(std::move(b));
  }
  if (r.remaining() != 0)
    fail_field(ppath, "size", std::to_string(r.offset()) + " bytes (sum of blocks)",
               std::to_string(payload_size) + " bytes");
  s.validate(mpath);
  return s;
}

}  // namespace ember::map
