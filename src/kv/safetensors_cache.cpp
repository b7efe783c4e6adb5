#include "kv/safetensors_cache.h"

#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>

#include "kv/import.h"
#include "kv/recompute_rows.h"
#include "model/engine.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/f16.h"

namespace ember::kv {

namespace st = ember::safetensors;

namespace {

std::string vllm_file(int layer) { return "model.layers." + std::to_string(layer) + ".self_attn.attn.safetensors"; }

std::string shape_text(const std::vector<uint64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// Element i of a tensor of dtype d as f16 bits (round to nearest even from F32/BF16).
uint16_t to_f16(const uint8_t* p, st::Dtype d, size_t i) {
  if (d == st::Dtype::f16) {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    return h;
  }
  if (d == st::Dtype::bf16) {
    uint16_t b;
    std::memcpy(&b, p + 2 * i, 2);
    return f32_to_f16(bf16_to_f32(b));
  }
  float f;
  std::memcpy(&f, p + 4 * i, 4);
  return f32_to_f16(f);
}

void put(ByteSink& out, uint16_t h, st::Dtype d) {
  if (d == st::Dtype::f16) return out.write_le<uint16_t>(h);
  if (d == st::Dtype::bf16) return out.write_le<uint16_t>(f32_to_bf16(f16_to_f32(h)));
  out.write_le<float>(f16_to_f32(h));
}

// Position j of a head row in the order ember stores it, read from a Hugging Face row: for
// llama (normal) ember[2j] = hf[j], ember[2j + 1] = hf[d/2 + j]; neox: the identity.
size_t hf_index(size_t j, size_t d, bool permute) {
  if (!permute) return j;
  return j % 2 == 0 ? j / 2 : d / 2 + j / 2;
}

struct Source {
  const uint8_t* data;
  st::Dtype dtype;
  // element offset of (head h, position p) row start, and the stride between positions
  size_t head_stride, pos_stride;
};

void fill(model::KvCache& c, int layer, bool keys, const Source& s, bool permute, const std::string& where,
          const std::string& tensor) {
  const size_t d = size_t(c.head_dim);
  for (int h = 0; h < c.n_kv_heads; ++h)
    for (int p = 0; p < c.n_pos; ++p) {
      uint16_t* row = keys ? c.k_row(layer, h, p) : c.v_row(layer, h, p);
      const size_t base = size_t(h) * s.head_stride + size_t(p) * s.pos_stride;
      for (size_t j = 0; j < d; ++j) {
        const uint16_t v = to_f16(s.data, s.dtype, base + hf_index(j, d, keys && permute));
        if ((v & 0x7c00u) == 0x7c00u)
          fail_field(where, "tensor \"" + tensor + "\"",
                     "finite values that fit f16 (ember's cache type)",
                     std::string(v & 0x3ffu ? "NaN" : "Inf") + " at kv_head " + std::to_string(h) + ", position " +
                         std::to_string(p) + ", dim " + std::to_string(keys && permute ? hf_index(j, d, true) : j));
        row[j] = v;
      }
    }
}

st::Dtype cache_dtype(const st::TensorInfo& t, const std::string& where) {
  if (t.dtype != st::Dtype::f16 && t.dtype != st::Dtype::bf16 && t.dtype != st::Dtype::f32)
    fail_field(where, "tensor \"" + t.name + "\".dtype", "F16|BF16|F32", st::dtype_name(t.dtype));
  return t.dtype;
}

void check_positions(uint64_t p, const std::string& where, const std::string& tensor) {
  if (p < 1 || p > uint64_t(kMaxPositions))
    fail_field(where, "tensor \"" + tensor + "\".shape", "1.." + std::to_string(kMaxPositions) + " positions",
               std::to_string(p));
}

ForeignCache read_mlx(const std::string& path, const Geometry& g, bool permute) {
  const st::File f = st::File::open(path);
  const st::Header& h = f.header();
  std::set<std::string> want;
  for (int l = 0; l < g.layers; ++l) want.insert({std::to_string(l) + ".0", std::to_string(l) + ".1"});
  for (const auto& t : h.tensors)
    if (!want.count(t.name))
      fail_field(path, "tensor \"" + t.name + "\"",
                 "only \"{layer}.0\" / \"{layer}.1\" for layers 0.." + std::to_string(g.layers - 1) +
                     " (mlx-lm KVCache keys/values)",
                 "an unexpected tensor");
  for (int l = 0; l < g.layers; ++l) {
    const auto it = h.metadata.find("2." + std::to_string(l));
    if (it != h.metadata.end() && it->second != "KVCache")
      fail_field(path, "__metadata__.2." + std::to_string(l), "\"KVCache\" (a plain mlx-lm cache)", it->second);
  }
  ForeignCache out;
  out.layout = SafetensorsLayout::mlx;
  out.source_sha256 = sha256_hex(f.file_bytes().data(), f.file_bytes().size());
  out.source_bytes = f.file_bytes().size();
  uint64_t P = 0;
  for (int l = 0; l < g.layers; ++l)
    for (int kv = 0; kv < 2; ++kv) {
      const std::string name = std::to_string(l) + "." + std::to_string(kv);
      const st::TensorInfo* t = h.find(name);
      if (!t) fail_field(path, "tensor \"" + name + "\"", "present (layer " + std::to_string(l) + (kv ? " values)" : " keys)"), "none");
      const st::Dtype d = cache_dtype(*t, path);
      if (out.source_dtype.empty()) out.source_dtype = st::dtype_name(d);
      if (out.source_dtype != st::dtype_name(d))
        fail_field(path, "tensor \"" + name + "\".dtype", out.source_dtype + " (as the first tensor)", st::dtype_name(d));
      if (t->shape.size() == 4 && P == 0) {
        P = t->shape[2];
        check_positions(P, path, name);
        out.cache = model::KvCache(g.layers, g.kv_heads, g.head_dim, int(P));
        out.cache.n_pos = int(P);
      }
      const std::vector<uint64_t> shape{1, uint64_t(g.kv_heads), P, uint64_t(g.head_dim)};
      if (t->shape != shape)
        fail_field(path, "tensor \"" + name + "\".shape",
                   shape_text(shape) + " [batch, kv_heads, positions, head_dim] of the model", shape_text(t->shape));
      fill(out.cache, l, kv == 0, {f.bytes(*t).data(), d, size_t(P) * g.head_dim, size_t(g.head_dim)}, permute, path,
           name);
    }
  return out;
}

ForeignCache read_vllm(const std::string& dir, const Geometry& g, bool permute) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(dir, ec)))
    fail_field(dir, "path", "a directory of per-layer files (vLLM example connector)", "not a directory");
  std::set<std::string> want;
  for (int l = 0; l < g.layers; ++l) want.insert(vllm_file(l));
  fs::directory_iterator it(dir, ec);
  if (ec) fail_field(dir, "directory", "readable", ec.message());
  for (const auto& e : it) {
    const std::string n = e.path().filename().string();
    if (!want.count(n))
      fail_field(dir, "entry \"" + n + "\"",
                 "only model.layers.{i}.self_attn.attn.safetensors for layers 0.." + std::to_string(g.layers - 1),
                 "an unexpected entry");
  }
  ForeignCache out;
  out.layout = SafetensorsLayout::vllm;
  Sha256 source;  // the per-layer files, in layer order
  uint64_t P = 0;
  const uint64_t width = uint64_t(g.kv_heads) * uint64_t(g.head_dim);
  for (int l = 0; l < g.layers; ++l) {
    const std::string path = dir + "/" + vllm_file(l);
    if (!fs::exists(fs::symlink_status(path, ec))) fail_field(dir, "entry \"" + vllm_file(l) + "\"", "present", "none");
    const st::File f = st::File::open(path);
    source.update(f.file_bytes().data(), f.file_bytes().size());
    out.source_bytes += f.file_bytes().size();
    const st::Header& h = f.header();
    if (h.tensors.size() != 1 || h.tensors[0].name != "kv_cache")
      fail_field(path, "tensors", "exactly one, \"kv_cache\"",
                 std::to_string(h.tensors.size()) + (h.tensors.empty() ? "" : ", first \"" + h.tensors[0].name + "\""));
    const st::TensorInfo& t = h.tensors[0];
    const st::Dtype d = cache_dtype(t, path);
    if (out.source_dtype.empty()) out.source_dtype = st::dtype_name(d);
    if (out.source_dtype != st::dtype_name(d))
      fail_field(path, "tensor \"kv_cache\".dtype", out.source_dtype + " (as layer 0)", st::dtype_name(d));
    if (P == 0 && t.shape.size() == 3) {
      P = t.shape[1];
      check_positions(P, path, "kv_cache");
      out.cache = model::KvCache(g.layers, g.kv_heads, g.head_dim, int(P));
      out.cache.n_pos = int(P);
    }
    const std::vector<uint64_t> shape{2, P, width};
    if (t.shape != shape)
      fail_field(path, "tensor \"kv_cache\".shape",
                 shape_text(shape) + " [K/V, positions, kv_heads * head_dim] of the model", shape_text(t.shape));
    const uint8_t* data = f.bytes(t).data();
    const size_t half = size_t(P) * width * st::dtype_size(d);
    fill(out.cache, l, true, {data, d, size_t(g.head_dim), size_t(width)}, permute, path, "kv_cache[0]");
    fill(out.cache, l, false, {data + half, d, size_t(g.head_dim), size_t(width)}, permute, path, "kv_cache[1]");
  }
  out.source_sha256 = to_hex(source.finish());
  return out;
}

// Writes rows of (layer, keys?) of c for heads [0, H) and positions [0, P) in the order
// (head, position) or (position, head), converting and permuting.
void emit(ByteSink& out, const model::KvCache& c, int layer, bool keys, bool permute, bool position_major,
          st::Dtype dtype) {
  const size_t d = size_t(c.head_dim);
  std::vector<uint16_t> hf(d);
  auto row = [&](int h, int p) {
    const uint16_t* r = keys ? c.k_row(layer, h, p) : c.v_row(layer, h, p);
    for (size_t j = 0; j < d; ++j) hf[hf_index(j, d, keys && permute)] = r[j];
    for (uint16_t v : hf) put(out, v, dtype);
  };
  if (position_major) {
    for (int p = 0; p < c.n_pos; ++p)
      for (int h = 0; h < c.n_kv_heads; ++h) row(h, p);
  } else {
    for (int h = 0; h < c.n_kv_heads; ++h)
      for (int p = 0; p < c.n_pos; ++p) row(h, p);
  }
}

}  // namespace

SafetensorsLayout parse_safetensors_layout(const std::string& s) {
  if (s == "mlx") return SafetensorsLayout::mlx;
  if (s == "vllm") return SafetensorsLayout::vllm;
  fail_field("--layout", "value", "mlx|vllm", s);
}

ForeignCache read_safetensors_cache(const std::string& path, SafetensorsLayout layout, const Geometry& g,
                                    const std::string& rope_layout) {
  if (rope_layout != "normal" && rope_layout != "neox")
    fail_field(path, "rope layout", "normal|neox", rope_layout);
  EMBER_CHECK(g.layers > 0 && g.kv_heads > 0 && g.head_dim > 0 && g.head_dim % 2 == 0);
  const bool permute = rope_layout == "normal";
  return layout == SafetensorsLayout::mlx ? read_mlx(path, g, permute) : read_vllm(path, g, permute);
}

void write_safetensors_cache(const model::KvCache& c, const std::string& rope_layout, SafetensorsLayout layout,
                             st::Dtype dtype, const std::map<std::string, std::string>& metadata,
                             const std::string& path, bool force) {
  if (dtype != st::Dtype::f16 && dtype != st::Dtype::bf16 && dtype != st::Dtype::f32)
    fail_field(path, "dtype", "F16|BF16|F32", st::dtype_name(dtype));
  const bool permute = rope_layout == "normal";
  const uint64_t H = uint64_t(c.n_kv_heads), P = uint64_t(c.n_pos), D = uint64_t(c.head_dim);
  if (layout == SafetensorsLayout::mlx) {
    std::vector<st::OutTensor> ts;
    std::map<std::string, std::string> md;
    for (int l = 0; l < c.n_layers; ++l) {
      for (int kv = 0; kv < 2; ++kv)
        ts.push_back({std::to_string(l) + "." + std::to_string(kv), dtype, {1, H, P, D},
                      [&c, l, kv, permute, dtype](ByteSink& o) { emit(o, c, l, kv == 0, permute, false, dtype); }});
      md["0." + std::to_string(l)] = "";
      md["2." + std::to_string(l)] = "KVCache";
    }
    for (const auto& [k, v] : metadata) md["1." + k] = v;
    st::write_file(path, ts, md, force);
    return;
  }
  // --force replaces only a vLLM cache directory ember could have written (any layer count).
  AtomicDirectory dir(path, DirectoryKind::numbered("a vLLM cache directory", "model.layers.", ".self_attn.attn.safetensors"),
                      force);
  for (int l = 0; l < c.n_layers; ++l) {
    auto f = dir.create(vllm_file(l));
    st::write(f->sink(),
              {{"kv_cache", dtype, {2, P, H * D},
                [&c, l, permute, dtype](ByteSink& o) {
                  emit(o, c, l, true, permute, true, dtype);
                  emit(o, c, l, false, permute, true, dtype);
                }}},
              metadata, path + "/" + vllm_file(l));
    f->commit();
  }
  dir.commit();
}

}  // namespace ember::kv

namespace ember::kv {

ForeignImport import_foreign(model::Engine& engine, const std::string& tokenizer_identity,
                             std::span<const int32_t> prefix, ForeignCache foreign,
                             const ForeignImportOptions& options, const std::string& where) {
  model::KvCache& c = foreign.cache;
  const int P = c.n_pos;
  if (int64_t(prefix.size()) != P)
    fail_field(where, "prefix", std::to_string(P) + " tokens (the positions the file holds)",
               std::to_string(prefix.size()));
  if (P + 1 > engine.position_limit())
    fail_field(where, "positions", "at most " + std::to_string(engine.position_limit() - 1) + " (the model's limit less the resume token)",
               std::to_string(P));
  KvState s;
  s.manifest = describe_target(engine, tokenizer_identity);
  s.manifest.producer = options.producer;
  const Geometry& g = s.manifest.geometry;
  if (g.layers != c.n_layers || g.kv_heads != c.n_kv_heads || g.head_dim != c.head_dim)
    fail_field(where, "geometry", "the model's", "other");  // read_safetensors_cache checked it
  s.manifest.prefix.tokens.assign(prefix.begin(), prefix.end());
  // The model check, over the imported rows as the file stored them (its dtype, rounded).
  const std::string& sd = foreign.source_dtype;
  const StoredRowType stored{sd == "F32" ? kGgmlF32 : sd == "BF16" ? kGgmlBf16 : kGgmlF16, 0};
  const std::vector<int> positions = options.model_check
                                         ? spot_positions(P, options.check_positions, kModelCheckSeed)
                                         : std::vector<int>{P - 1};
  ModelCheck check = check_foreign_rows(engine, c, prefix, stored, stored, positions);
  check.skipped = !options.model_check;
  if (!check.ok()) refuse_model_check(check, where);
  s.manifest.producer += (s.manifest.producer.empty() ? "" : "; ") + model_check_summary(check);
  const std::vector<float>& boundary = check.logits;
  // Greedy argmax, ties to the lowest id, as export_prefix selects.
  int32_t resume = 0;
  for (size_t i = 1; i < boundary.size(); ++i)
    if (boundary[i] > boundary[size_t(resume)]) resume = int32_t(i);
  s.manifest.resume.token = resume;
  s.manifest.resume.position = P;
  s.manifest.past_context = P > engine.config().n_ctx;
  // Another runtime computed these rows: a foreign state, whatever wrote the file.
  const bool mlx = foreign.layout == SafetensorsLayout::mlx;
  ForeignProvenance f;
  f.engine = !options.engine.empty() ? options.engine : mlx ? "mlx" : "vllm";
  f.format = mlx ? "safetensors-mlx" : "safetensors-vllm";
  f.format_version = 1;
  std::string dtype = foreign.source_dtype;
  for (char& ch : dtype) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  f.cache_type_k = f.cache_type_v = dtype;
  f.conversion = dtype == "f16" ? "exact" : "rounded-to-f16";
  f.resume_source = "ember-last-prompt-token";
  f.source_sha256 = foreign.source_sha256;
  f.source_bytes = foreign.source_bytes;
  f.details = {{"layout", mlx ? "mlx" : "vllm"}};
  s.manifest.numerics.contract = kForeignContract;
  s.manifest.numerics.engine_fingerprint = f.engine + ";" + f.format + ";k=" + dtype + ";v=" + dtype;
  s.provenance = std::move(f);
  s.cache = std::move(c);
  VerifiedState sealed = seal(std::move(s), where);
  return {std::move(sealed), std::move(check)};
}

}  // namespace ember::kv
