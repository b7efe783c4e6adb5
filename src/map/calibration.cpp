#include "map/calibration.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "util/json_fields.h"
#include "util/json_strict.h"
#include "util/atomic_file.h"
#include "util/byte_io.h"
#include "util/error.h"
#include "util/mapped_file.h"
#include "util/sha256.h"
#include "util/thread_pool.h"

namespace ember::map {
namespace {

constexpr int kMaxDim = 1 << 16;
constexpr int kMaxLayers = 1024;
constexpr int64_t kMaxRows = int64_t(1) << 24;
constexpr size_t kMaxPrompts = size_t(1) << 24;

// Doubles of one problem's statistics in the payload: G (packed), C, yy.
bool stats_doubles(int d_in, int d_out, uint64_t* out) {
  uint64_t g = 0, c = 0;
  if (__builtin_mul_overflow(uint64_t(d_in) + 1, uint64_t(d_in) + 2, &g)) return false;
  g /= 2;
  if (__builtin_mul_overflow(uint64_t(d_in) + 1, uint64_t(d_out), &c)) return false;
  return !__builtin_add_overflow(g, c, out) && !__builtin_add_overflow(*out, uint64_t(d_out), out);
}

int n_boundaries(const CalibrationSet& s) {
  return s.residual ? std::max(0, s.target.n_layers - 1 - s.shared_layers) : 0;
}

// The payload's size in bytes for this geometry; false on overflow.
bool payload_bytes(const CalibrationSet& s, uint64_t* out) {
  uint64_t head = 0, res = 0, total = 0, t = 0;
  if (!stats_doubles(s.source.head_dim, s.target.head_dim, &head)) return false;
  if (!stats_doubles(s.source.n_embd, s.target.n_embd, &res)) return false;
  // 2 parts x (K + V) x layers x heads, then 2 parts x boundaries.
  if (__builtin_mul_overflow(head, uint64_t(4) * uint64_t(s.target.n_layers) * uint64_t(s.target.n_kv_heads), &total))
    return false;
  if (__builtin_mul_overflow(res, uint64_t(2) * uint64_t(n_boundaries(s)), &t)) return false;
  if (__builtin_add_overflow(total, t, &total)) return false;
  return !__builtin_mul_overflow(total, uint64_t(sizeof(double)), out);
}

// Geometry > 0, matching layer and KV head counts, s in [0, L].
void check_geometry(const CalibrationSet& s, const std::string& where) {
  const ModelGeometry &source = s.source, &target = s.target;
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
  if (s.shared_layers < 0 || s.shared_layers > source.n_layers)
    fail_field(where, "shared_layers", "in [0, n_layers]", std::to_string(s.shared_layers));
}

// Every statistic of the set, in payload order: part 0 then 1; per part the heads
// (layer-major: K then V), then the residual boundaries.
template <typename Set, typename Fn>
void for_each_stats(Set& s, Fn fn) {
  for (int p = 0; p < 2; ++p) {
    for (size_t i = 0; i < s.k[p].size(); ++i) {
      fn(s.k[p][i]);
      fn(s.v[p][i]);
    }
    for (auto& r : s.res[p]) fn(r);
  }
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

CalibrationSet CalibrationSet::empty(const ModelGeometry& source, const ModelGeometry& target,
                                     const std::string& tokenizer_identity, int shared_layers,
                                     const PromptSplit& split, bool residual) {
  CalibrationSet s;
  s.source = source;
  s.target = target;
  s.tokenizer_identity = tokenizer_identity;
  s.shared_layers = shared_layers;
  s.split = split;
  s.residual = residual;
  check_geometry(s, "calibration");
  const size_t heads = size_t(target.n_layers) * target.n_kv_heads;
  for (int p = 0; p < 2; ++p) {
    s.k[p].assign(heads, NormalEquations(source.head_dim, target.head_dim));
    s.v[p].assign(heads, NormalEquations(source.head_dim, target.head_dim));
    s.res[p].assign(size_t(n_boundaries(s)), NormalEquations(source.n_embd, target.n_embd));
  }
  return s;
}

const NormalEquations* CalibrationSet::res_stats(SplitPart p, int boundary) const {
  const int i = boundary - shared_layers - 1;
  if (i < 0 || size_t(i) >= res[int(p)].size()) return nullptr;
  return &res[int(p)][size_t(i)];
}

size_t CalibrationSet::n_prompts(SplitPart p) const {
  size_t n = 0;
  for (const auto& c : prompts) n += c.part == p;
  return n;
}

void CalibrationSet::add_prompt(const std::string& hash, SplitPart part, const ModelRows& src, const ModelRows& tgt,
                                ThreadPool* pool, const std::string& where) {
  if (part == SplitPart::calib) {
    split.check_fit_prompt(hash, where);
  } else if (!split.is_eval(hash)) {
    fail_field(where, "prompt", "an evaluation prompt of split " + split.hash(),
               (split.is_calib(hash) ? "calibration prompt " : "unknown prompt ") + hash);
  }
  for (const auto& c : prompts)
    if (c.prompt_hash == hash) fail_field(where, "prompt_hash", "each prompt once", "duplicate " + hash);
  const int n = src.n_rows;
  const int L = target.n_layers, G = target.n_kv_heads, ds = source.head_dim, dt = target.head_dim;
  if (n <= 0 || n > kMaxRows || tgt.n_rows != n)
    fail_field(where, "rows", "the same positive row count on both sides", std::to_string(n) + " vs " + std::to_string(tgt.n_rows));
  if (src.k.size() != size_t(L) * G * n * ds || src.v.size() != src.k.size() ||
      tgt.k.size() != size_t(L) * G * n * dt || tgt.v.size() != tgt.k.size() ||
      src.res.size() != size_t(L + 1) * n * source.n_embd || tgt.res.size() != size_t(L + 1) * n * target.n_embd)
    fail_field(where, "rows", "arrays sized by the geometry", "mismatched array sizes");
  // The problems, largest first, dealt round-robin to the threads (each problem is one task).
  struct Job {
    NormalEquations* ne;
    const float *x, *y;
  };
  std::vector<Job> jobs;
  const int p = int(part);
  for (int b = shared_layers + 1; b < L && residual; ++b)
    jobs.push_back({&res[p][size_t(b - shared_layers - 1)], src.res.data() + size_t(b) * n * source.n_embd,
                    tgt.res.data() + size_t(b) * n * target.n_embd});
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < G; ++h) {
      const size_t i = size_t(l) * G + h;
      jobs.push_back({&k[p][i], src.k.data() + i * n * ds, tgt.k.data() + i * n * dt});
      jobs.push_back({&v[p][i], src.v.data() + i * n * ds, tgt.v.data() + i * n * dt});
    }
  const int T = pool ? pool->size() : 1;
  const auto run = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      for (size_t j = size_t(t); j < jobs.size(); j += size_t(T)) jobs[j].ne->add(jobs[j].x, jobs[j].y, n);
  };
  if (pool && T > 1) pool->parallel_for(T, run); else run(0, 1);
  prompts.push_back({hash, part, n});
}

void CalibrationSet::validate(const std::string& where) const {
  check_geometry(*this, where);
  std::set<std::string> seen;
  int64_t rows[2] = {0, 0};
  for (size_t i = 0; i < prompts.size(); ++i) {
    const CalibPrompt& b = prompts[i];
    const std::string field = "prompts[" + std::to_string(i) + "]";
    if (b.rows <= 0 || b.rows > kMaxRows)
      fail_field(where, field + ".rows", "in [1, 2^24]", std::to_string(b.rows));
    if (!seen.insert(b.prompt_hash).second)
      fail_field(where, field + ".prompt_hash", "each prompt once", "duplicate " + b.prompt_hash);
    const bool in_eval = split.is_eval(b.prompt_hash), in_calib = split.is_calib(b.prompt_hash);
    if (b.part == SplitPart::calib && !in_calib)
      fail_field(where, field + ".part", in_eval ? "eval (the split says so)" : "a prompt of the split",
                 "calib for prompt " + b.prompt_hash);
    if (b.part == SplitPart::eval && !in_eval)
      fail_field(where, field + ".part", in_calib ? "calib (the split says so)" : "a prompt of the split",
                 "eval for prompt " + b.prompt_hash);
    rows[int(b.part)] += b.rows;
  }
  const size_t heads = size_t(target.n_layers) * target.n_kv_heads;
  for (int p = 0; p < 2; ++p) {
    const std::string part = split_part_name(SplitPart(p));
    if (k[p].size() != heads || v[p].size() != heads || res[p].size() != size_t(n_boundaries(*this)))
      fail_field(where, "statistics", "sized by the geometry", "mismatched counts");
    const auto check = [&](const NormalEquations& ne, int d_in, int d_out, const std::string& what) {
      if (ne.d_in() != d_in || ne.d_out() != d_out || ne.g().size() != NormalEquations::g_size(d_in) ||
          ne.c().size() != size_t(d_in + 1) * d_out || ne.yy().size() != size_t(d_out))
        fail_field(where, what, "statistics sized by the geometry", "mismatched sizes");
      if (ne.rows() != rows[p])
        fail_field(where, what + ".rows", std::to_string(rows[p]) + " (the " + part + " prompts' rows)",
                   std::to_string(ne.rows()));
      // G's ones entry counts the rows exactly (an integer below 2^53).
      if (ne.g().back() != double(rows[p]))
        fail_field(where, what, "G's ones entry equal to the row count " + std::to_string(rows[p]),
                   std::to_string(ne.g().back()));
      for (const auto* vec : {&ne.g(), &ne.c(), &ne.yy()})
        for (double x : *vec)
          if (!std::isfinite(x)) fail_field(where, what, "finite statistics", "a NaN or Inf");
    };
    for (size_t i = 0; i < heads; ++i) {
      const std::string h = part + ".layer " + std::to_string(i / size_t(target.n_kv_heads)) + " head " +
                            std::to_string(i % size_t(target.n_kv_heads));
      check(k[p][i], source.head_dim, target.head_dim, h + " K");
      check(v[p][i], source.head_dim, target.head_dim, h + " V");
    }
    for (size_t i = 0; i < res[p].size(); ++i)
      check(res[p][i], source.n_embd, target.n_embd,
            part + ".residual " + std::to_string(shared_layers + 1 + int(i)));
  }
}

void CalibrationSet::write(const std::string& dir, bool force) const {
  validate(dir);
  AtomicDirectory out(dir, DirectoryKind::fixed("an ember calibration set", {"manifest.json", "stats.f64le"}), force);
  nlohmann::json prompts_json = nlohmann::json::array();
  for (const CalibPrompt& b : prompts)
    prompts_json.push_back({{"prompt_hash", b.prompt_hash}, {"part", split_part_name(b.part)}, {"rows", b.rows}});
  {
    auto file = out.create("stats.f64le");
    HashingSink tee(&file->sink());
    for_each_stats(*this, [&](const NormalEquations& ne) {
      for (const auto* vec : {&ne.g(), &ne.c(), &ne.yy()}) tee.write(vec->data(), vec->size() * sizeof(double));
    });
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
    m["residual_statistics"] = residual;
    m["prompts"] = prompts_json;
    m["payload"] = {{"file", "stats.f64le"}, {"bytes", n}, {"sha256", sha}};
    auto mf = out.create("manifest.json");
    mf->sink().write(m.dump(2) + "\n");
    mf->commit();
  }
  out.commit();
}

CalibrationSet CalibrationSet::read(const std::string& dir) {
  const std::string mpath = dir + "/manifest.json";
  const std::string text = read_file(mpath, size_t(1) << 28);
  const std::string ppath = dir + "/stats.f64le";
  const auto mapping = MappedFile::open(ppath);
  return parse(text, mapping->data(), mapping->size(), mpath, ppath);
}

CalibrationSet CalibrationSet::parse(const std::string& manifest_text, const uint8_t* payload,
                                     size_t payload_size, const std::string& mpath,
                                     const std::string& ppath) {
  const nlohmann::json m = ember::parse_json_strict(manifest_text, mpath);
  StrictObject top(m, "", mpath);
  if (top.has("format") && m["format"] == "ember.map-calibration.v1")
    fail_field(mpath, "format",
               std::string(kCalibrationFormat) +
                   " (v1 sets hold every row and are no longer read; re-run map collect, which now keeps the "
                   "fits' statistics)",
               "ember.map-calibration.v1");
  top.expect_string("format", kCalibrationFormat);
  const ModelGeometry source = ModelGeometry::from_json(top.object("source"));
  const ModelGeometry target = ModelGeometry::from_json(top.object("target"));
  const std::string tokenizer_identity = top.string("tokenizer_identity", 128);
  const int shared = int(top.integer("shared_layers", 0, kMaxLayers));
  top.expect_string("key_state", kKeyState);
  top.expect_string("value_state", kValueState);
  const PromptSplit split = PromptSplit::from_json(top.object("split"));
  const bool residual = top.boolean("residual_statistics");
  uint64_t bytes = 0;
  std::string sha;
  {
    StrictObject p = top.object("payload");
    p.expect_string("file", "stats.f64le");
    bytes = p.unsigned_integer("bytes", UINT64_MAX);
    sha = p.string("sha256", 128);
    p.done();
  }
  CalibrationSet probe;  // geometry only: sizes the payload before anything is allocated
  probe.source = source;
  probe.target = target;
  probe.shared_layers = shared;
  probe.residual = residual;
  check_geometry(probe, mpath);
  uint64_t want = 0;
  if (!payload_bytes(probe, &want)) fail_field(mpath, "source", "a geometry whose statistics fit in 2^64 bytes", "more");
  if (bytes != want)
    fail_field(mpath, "payload.bytes", std::to_string(want) + " (the statistics of this geometry)", std::to_string(bytes));
  if (payload_size != bytes)
    fail_field(ppath, "size", std::to_string(bytes) + " bytes", std::to_string(payload_size) + " bytes");
  const std::string found = sha256_hex(payload, payload_size);
  if (found != sha) fail_field(ppath, "sha256", sha, found);
  const nlohmann::json& prompts = top.array("prompts", kMaxPrompts);
  top.done();
  std::vector<CalibPrompt> list;
  int64_t rows[2] = {0, 0};
  for (size_t i = 0; i < prompts.size(); ++i) {
    StrictObject bj = top.object_at("prompts", prompts, i);
    CalibPrompt c;
    c.prompt_hash = bj.string("prompt_hash", 128);
    const std::string part = bj.string("part", 16);
    if (part != "calib" && part != "eval") fail_field(mpath, bj.field("part"), "calib or eval", part);
    c.part = part == "calib" ? SplitPart::calib : SplitPart::eval;
    c.rows = int(bj.integer("rows", 1, kMaxRows));
    bj.done();
    rows[int(c.part)] += c.rows;
    list.push_back(std::move(c));
  }
  CalibrationSet s = empty(source, target, tokenizer_identity, shared, split, residual);
  s.prompts = std::move(list);
  ByteReader r(payload, payload_size, ppath);
  size_t index = 0;
  for_each_stats(s, [&](NormalEquations& ne) {
    for (auto* vec : {&ne.g(), &ne.c(), &ne.yy()})
      std::memcpy(vec->data(), r.take(vec->size() * sizeof(double), "statistics " + std::to_string(index)),
                  vec->size() * sizeof(double));
    ++index;
  });
  for (int part = 0; part < 2; ++part)
    for (auto* list_of : {&s.k[part], &s.v[part], &s.res[part]})
      for (auto& ne : *list_of) ne.set_rows(rows[part]);
  if (r.remaining() != 0)
    fail_field(ppath, "size", std::to_string(r.offset()) + " bytes", std::to_string(payload_size) + " bytes");
  s.validate(mpath);
  return s;
}

}  // namespace ember::map
