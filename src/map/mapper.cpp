#include "map/mapper.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "kv/state.h"
#include "util/json_fields.h"
#include "util/json_strict.h"
#include "util/atomic_file.h"
#include "util/byte_io.h"
#include "util/error.h"
#include "util/mapped_file.h"
#include "util/progress.h"
#include "util/sha256.h"
#include "util/thread_pool.h"

namespace ember::map {
namespace {

constexpr int kMaxLayersRead = 1024;  // as ModelGeometry allows

nlohmann::json r2_json(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }
// Weights payload order: for each (layer, head): K w, K b, V w, V b; then each residual map
// w, b. All f64 little-endian.
void write_weights(const Mapper& m, ByteSink& out) {
  auto put = [&](const LinearMap& l) {
    out.write(l.w.data(), l.w.size() * sizeof(double));
    out.write(l.b.data(), l.b.size() * sizeof(double));
  };
  for (const HeadMaps& h : m.heads) {
    put(h.k);
    put(h.v);
  }
  for (const ResidualMap& r : m.residual) put(r.map);
}

std::string weights_sha(const Mapper& m, uint64_t* n_bytes) {
  HashingSink h;
  write_weights(m, h);
  *n_bytes = h.n_bytes();
  return to_hex(h.finish());
}

void read_map(ByteReader& r, LinearMap& l, int d_in, int d_out, const std::string& field) {
  l.d_in = d_in;
  l.d_out = d_out;
  l.w.resize(size_t(d_in) * d_out);
  l.b.resize(size_t(d_out));
  std::memcpy(l.w.data(), r.take(l.w.size() * sizeof(double), field + ".w"), l.w.size() * sizeof(double));
  std::memcpy(l.b.data(), r.take(l.b.size() * sizeof(double), field + ".b"), l.b.size() * sizeof(double));
  for (double v : l.w)
    if (!std::isfinite(v)) fail_field(r.where(), field, "finite weights", "a NaN or Inf");
  for (double v : l.b)
    if (!std::isfinite(v)) fail_field(r.where(), field, "finite weights", "a NaN or Inf");
}

}  // namespace

const char* mapper_kind_name(MapperKind k) {
  switch (k) {
    case MapperKind::identity: return "identity";
    case MapperKind::ridge: return "ridge";
    case MapperKind::affine: return "affine";
  }
  return "?";
}

MapperKind parse_mapper_kind(const std::string& s, const std::string& where) {
  if (s == "identity") return MapperKind::identity;
  if (s == "ridge") return MapperKind::ridge;
  if (s == "affine") return MapperKind::affine;
  fail_field(where, "kind", "identity, ridge or affine", s);
}

const ResidualMap* Mapper::residual_at(int boundary) const {
  for (const auto& r : residual)
    if (r.boundary == boundary) return &r;
  return nullptr;
}

nlohmann::json Mapper::manifest() const {
  nlohmann::json m;
  m["format"] = kMapperFormat;
  m["kind"] = mapper_kind_name(kind);
  m["relation"] = relation;
  m["lambda"] = lambda;
  m["affine"] = affine;
  m["anchor_identity"] = anchor_identity;
  m["source"] = source.to_json();
  m["target"] = target.to_json();
  m["tokenizer_identity"] = tokenizer_identity;
  m["calibration_split_hash"] = split_hash;
  m["shared_layers"] = shared_layers;
  m["key_space"] = kKeyState;
  m["value_state"] = kValueState;
  m["calib_rows"] = calib_rows;
  m["eval_rows"] = eval_rows;
  nlohmann::json layers = nlohmann::json::array();
  for (int l = 0; l < target.n_layers; ++l) {
    nlohmann::json hs = nlohmann::json::array();
    for (int h = 0; h < target.n_kv_heads; ++h) {
      const HeadMaps& hm = head(l, h);
      hs.push_back({{"head", h},
                    {"k_r2_train", r2_json(hm.k_r2_train)}, {"k_r2_eval", r2_json(hm.k_r2_eval)},
                    {"v_r2_train", r2_json(hm.v_r2_train)}, {"v_r2_eval", r2_json(hm.v_r2_eval)}});
    }
    layers.push_back({{"layer", l}, {"heads", hs}});
  }
  m["layers"] = layers;
  nlohmann::json res = nlohmann::json::array();
  for (const auto& r : residual)
    res.push_back({{"boundary", r.boundary}, {"r2_train", r2_json(r.r2_train)},
                   {"r2_eval", r2_json(r.r2_eval)}});
  m["residual_maps"] = res;
  uint64_t n = 0;
  const std::string sha = weights_sha(*this, &n);
  m["weights"] = {{"file", "weights.f64le"}, {"bytes", n}, {"sha256", sha}};
  return m;
}

std::string Mapper::hash() const {
  return sha256_hex(std::string(kMapperFormat) + "\n" + canonical_json(manifest()));
}

void Mapper::write(const std::string& dir, bool force) const {
  if (!kv::is_relation(relation))
    fail_field(dir, "relation", "quantization-boundary, same-base or cross-model (--relation)",
               relation.empty() ? "none" : "'" + relation + "'");
  AtomicDirectory out(dir, DirectoryKind::fixed("an ember mapper directory", {"manifest.json", "weights.f64le"}), force);
  {
    auto f = out.create("weights.f64le");
    write_weights(*this, f->sink());
    f->commit();
  }
  nlohmann::json m = manifest();
  m["mapper_hash"] = hash();
  auto mf = out.create("manifest.json");
  mf->sink().write(m.dump(2) + "\n");
  mf->commit();
  out.commit();
}

Mapper Mapper::read(const std::string& dir) {
  const std::string mpath = dir + "/manifest.json";
  const std::string text = read_file(mpath, size_t(1) << 26);
  const std::string wpath = dir + "/weights.f64le";
  const auto mapping = MappedFile::open(wpath);
  return parse(text, mapping->data(), mapping->size(), mpath, wpath);
}

Mapper Mapper::parse(const std::string& manifest_text, const uint8_t* weights, size_t weights_size,
                     const std::string& mpath, const std::string& wpath) {
  const nlohmann::json m = ember::parse_json_strict(manifest_text, mpath);
  // Every key is read (done() refuses the rest), so the mapper hash, recomputed from what
  // was read, covers the whole manifest: an added field cannot ride along unhashed.
  StrictObject top(m, "", mpath);
  if (top.has("format") && m["format"] == "ember.kv-mapper.v1")
    fail_field(mpath, "format",
               std::string(kMapperFormat) + " (v1 mappers carry no relation label and are no longer read; refit "
               "with map fit --relation)",
               "ember.kv-mapper.v1");
  top.expect_string("format", kMapperFormat);
  Mapper mp;
  mp.kind = parse_mapper_kind(top.string("kind", 64), mpath);
  mp.relation = top.string("relation", 32);
  if (!kv::is_relation(mp.relation))
    fail_field(mpath, "relation", "quantization-boundary, same-base or cross-model", "'" + mp.relation + "'");
  mp.lambda = top.number("lambda");
  mp.affine = top.boolean("affine");
  mp.anchor_identity = top.boolean("anchor_identity");
  mp.source = ModelGeometry::from_json(top.object("source"));
  mp.target = ModelGeometry::from_json(top.object("target"));
  if (mp.source.n_layers != mp.target.n_layers || mp.source.n_kv_heads != mp.target.n_kv_heads)
    fail_field(mpath, "target", "the source's layer and KV head counts", "different counts");
  mp.tokenizer_identity = top.string("tokenizer_identity", 128);
  mp.split_hash = top.string("calibration_split_hash", 128);
  top.expect_string("key_space", kKeyState);
  top.expect_string("value_state", kValueState);
  mp.shared_layers = int(top.integer("shared_layers", 0, mp.target.n_layers));
  mp.calib_rows = top.integer("calib_rows", 0, INT64_MAX);
  mp.eval_rows = top.integer("eval_rows", 0, INT64_MAX);
  std::string weights_sha;
  uint64_t weights_bytes = 0;
  {
    StrictObject w = top.object("weights");
    w.expect_string("file", "weights.f64le");
    weights_bytes = w.unsigned_integer("bytes", UINT64_MAX);
    weights_sha = w.string("sha256", 128);
    w.done();
  }
  if (weights_size != weights_bytes)
    fail_field(wpath, "size", std::to_string(weights_bytes) + " bytes (weights.bytes)",
               std::to_string(weights_size) + " bytes");
  const std::string found = sha256_hex(weights, weights_size);
  if (found != weights_sha) fail_field(wpath, "sha256", weights_sha, found);
  ByteReader r(weights, weights_size, wpath);

  const nlohmann::json& layers = top.array("layers", size_t(kMaxLayersRead));
  if (int64_t(layers.size()) != mp.target.n_layers)
    fail_field(mpath, "layers", std::to_string(mp.target.n_layers) + " entries",
               std::to_string(layers.size()) + " entries");
  for (int l = 0; l < mp.target.n_layers; ++l) {
    StrictObject lj = top.object_at("layers", layers, size_t(l));
    if (lj.integer("layer", 0, INT32_MAX) != l)
      fail_field(mpath, lj.field("layer"), std::to_string(l), "another layer");
    const nlohmann::json& heads = lj.array("heads");
    if (int64_t(heads.size()) != mp.target.n_kv_heads)
      fail_field(mpath, lj.field("heads"), std::to_string(mp.target.n_kv_heads) + " entries",
                 std::to_string(heads.size()) + " entries");
    for (int h = 0; h < mp.target.n_kv_heads; ++h) {
      StrictObject hj = lj.object_at("heads", heads, size_t(h));
      if (hj.integer("head", 0, INT32_MAX) != h)
        fail_field(mpath, hj.field("head"), std::to_string(h), "another head");
      HeadMaps hm;
      hm.k_r2_train = hj.number_or_null("k_r2_train");
      hm.k_r2_eval = hj.number_or_null("k_r2_eval");
      hm.v_r2_train = hj.number_or_null("v_r2_train");
      hm.v_r2_eval = hj.number_or_null("v_r2_eval");
      hj.done();
      read_map(r, hm.k, mp.source.head_dim, mp.target.head_dim, hj.path() + ".k");
      read_map(r, hm.v, mp.source.head_dim, mp.target.head_dim, hj.path() + ".v");
      mp.heads.push_back(std::move(hm));
    }
    lj.done();
  }
  const nlohmann::json& res = top.array("residual_maps", size_t(kMaxLayersRead));
  int last = mp.shared_layers;
  for (size_t i = 0; i < res.size(); ++i) {
    StrictObject rj = top.object_at("residual_maps", res, i);
    ResidualMap rm;
    rm.boundary = int(rj.integer("boundary", INT32_MIN, INT32_MAX));
    if (rm.boundary <= last || rm.boundary >= mp.target.n_layers)
      fail_field(mpath, rj.field("boundary"),
                 "increasing, in (" + std::to_string(mp.shared_layers) + ", n_layers)",
                 std::to_string(rm.boundary));
    last = rm.boundary;
    rm.r2_train = rj.number_or_null("r2_train");
    rm.r2_eval = rj.number_or_null("r2_eval");
    rj.done();
    read_map(r, rm.map, mp.source.n_embd, mp.target.n_embd, rj.path() + ".map");
    mp.residual.push_back(std::move(rm));
  }
  if (r.remaining() != 0)
    fail_field(wpath, "size", std::to_string(r.offset()) + " bytes", std::to_string(weights_size) + " bytes");
  const std::string want = top.string("mapper_hash", 128);
  top.done();
  if (mp.hash() != want) fail_field(mpath, "mapper_hash", mp.hash(), want);
  return mp;
}

Mapper identity_mapper(const ModelGeometry& source, const ModelGeometry& target,
                       const std::string& tokenizer_identity, int shared_layers, const std::string& relation) {
  if (!source.same_shape(target))
    fail_field("identity mapper", "target geometry", "the source's geometry", "a different one");
  Mapper m;
  m.kind = MapperKind::identity;
  m.relation = relation;
  m.source = source;
  m.target = target;
  m.tokenizer_identity = tokenizer_identity;
  m.shared_layers = shared_layers;
  for (int i = 0; i < target.n_layers * target.n_kv_heads; ++i) {
    HeadMaps hm;
    hm.k = LinearMap::identity(target.head_dim);
    hm.v = LinearMap::identity(target.head_dim);
    hm.k_r2_train = hm.k_r2_eval = hm.v_r2_train = hm.v_r2_eval = std::nan("");
    m.heads.push_back(std::move(hm));
  }
  return m;
}

Mapper fit_mapper(const CalibrationSet& set, const MapperOptions& options) {
  const std::string where = "map fit";
  set.validate(where);
  if (options.kind == MapperKind::identity)
    return identity_mapper(set.source, set.target, set.tokenizer_identity, set.shared_layers, options.relation);
  if (set.rows(SplitPart::calib) <= 0 || set.n_prompts(SplitPart::calib) == 0)
    fail_field(where, "calibration prompts", "at least one", "none");
  if (options.anchor_identity && set.source.head_dim != set.target.head_dim)
    fail_field(where, "anchor_identity", "equal source and target head dims",
               std::to_string(set.source.head_dim) + " vs " + std::to_string(set.target.head_dim));
  if (options.residual_maps && !set.residual && set.shared_layers + 1 < set.target.n_layers)
    fail_field(where, "residual statistics", "collected (map collect without --no-residual-maps)",
               "none in this calibration set");

  Mapper m;
  m.kind = options.kind;
  m.lambda = options.lambda;
  m.affine = options.kind == MapperKind::affine;
  m.anchor_identity = options.anchor_identity;
  m.relation = options.relation;
  m.source = set.source;
  m.target = set.target;
  m.tokenizer_identity = set.tokenizer_identity;
  m.split_hash = set.split.hash();
  m.shared_layers = set.shared_layers;
  m.calib_rows = set.rows(SplitPart::calib);
  m.eval_rows = set.rows(SplitPart::eval);

  FitOptions fo;
  fo.lambda = options.lambda;
  fo.affine = m.affine;
  fo.anchor_identity = options.anchor_identity;
  FitOptions ro = fo;
  ro.anchor_identity = options.anchor_identity && set.source.n_embd == set.target.n_embd;
  const int L = set.target.n_layers, G = set.target.n_kv_heads;
  m.heads.resize(size_t(L) * G);
  if (options.residual_maps)
    for (int a = set.shared_layers + 1; a < L; ++a) m.residual.push_back(ResidualMap{a, {}, 0, 0});

  // The maps, largest first; each is solved and scored by one thread, so the partition over
  // threads changes no bit.
  struct Job {
    const NormalEquations *train, *eval;
    const FitOptions* fo;
    std::string where;
    LinearMap* out;
    double *r2_train, *r2_eval;
  };
  std::vector<Job> jobs;
  for (ResidualMap& rm : m.residual)
    jobs.push_back({set.res_stats(SplitPart::calib, rm.boundary), set.res_stats(SplitPart::eval, rm.boundary), &ro,
                    where + ": residual " + std::to_string(rm.boundary), &rm.map, &rm.r2_train, &rm.r2_eval});
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < G; ++h) {
      HeadMaps& hm = m.heads[size_t(l) * G + h];
      const std::string w = where + ": layer " + std::to_string(l) + " head " + std::to_string(h);
      jobs.push_back({&set.k_stats(SplitPart::calib, l, h), &set.k_stats(SplitPart::eval, l, h), &fo, w + " K",
                      &hm.k, &hm.k_r2_train, &hm.k_r2_eval});
      jobs.push_back({&set.v_stats(SplitPart::calib, l, h), &set.v_stats(SplitPart::eval, l, h), &fo, w + " V",
                      &hm.v, &hm.v_r2_train, &hm.v_r2_eval});
    }
  Progress progress(options.progress_label, int64_t(jobs.size()), "maps");
  std::vector<std::string> errors(jobs.size());
  std::atomic<int64_t> done{0};
  const auto solve = [&](size_t j) {
    const Job& job = jobs[j];
    try {
      *job.out = job.train->solve(*job.fo, job.where);
      *job.r2_train = job.train->r2(*job.out);
      *job.r2_eval = job.eval->r2(*job.out);
    } catch (const std::exception& e) {
      errors[j] = e.what();
    }
    ++done;
  };
  const int T = std::max(1, std::min<int>(options.threads, int(jobs.size())));
  if (T > 1) {
    ThreadPool pool(T);
    std::atomic<size_t> next{0};
    // Dynamic hand-out: which thread solves a map does not change its bits. One task (the
    // first) draws the status line.
    pool.parallel_for(T, [&](int64_t b, int64_t) {
      for (size_t j = next++; j < jobs.size(); j = next++) {
        solve(j);
        if (b == 0) progress.update(done);
      }
    });
  } else {
    for (size_t j = 0; j < jobs.size(); ++j) {
      solve(j);
      progress.update(done);
    }
  }
  progress.finish();
  for (const std::string& e : errors)
    if (!e.empty()) throw Error(e);
  return m;
}

}  // namespace ember::map
