// `ember bench`'s report in llama-bench's layouts, and the facts about the machine and the
// model file it records (perf/bench_report.h).
#include "perf/bench_report.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>

#include "gguf/gguf_file.h"
#include "gguf/types.h"
#include "util/build_info.h"
#include "util/error.h"
#include "util/printable.h"

namespace ember::perf {

using model::BenchTest;

namespace {

// llama.cpp's llama_ftype names (LLAMA_FTYPE_*), for general.file_type.
std::string ftype_name(int64_t ft) {
  static const std::map<int64_t, const char*> names = {
      {0, "all F32"}, {1, "F16"},     {2, "Q4_0"},     {3, "Q4_1"},    {7, "Q8_0"},
      {8, "Q5_0"},    {9, "Q5_1"},    {10, "Q2_K - Medium"}, {11, "Q3_K - Small"},
      {12, "Q3_K - Medium"}, {13, "Q3_K - Large"}, {14, "Q4_K - Small"},
      {15, "Q4_K - Medium"}, {16, "Q5_K - Small"}, {17, "Q5_K - Medium"}, {18, "Q6_K"},
      {32, "BF16"}};
  const auto it = names.find(ft);
  return it == names.end() ? std::string() : it->second;
}

std::string upper(std::string s) {
  for (char& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string size_label(uint64_t n_params) {
  char buf[32];
  if (n_params >= 1000000000ull) std::snprintf(buf, sizeof buf, "%.1fB", double(n_params) / 1e9);
  else if (n_params >= 1000000ull) std::snprintf(buf, sizeof buf, "%.0fM", double(n_params) / 1e6);
  else std::snprintf(buf, sizeof buf, "%.0fK", double(n_params) / 1e3);
  return buf;
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (const char c : s) {
    if (c == '"') o += "\\\"";
    else if (c == '\\') o += "\\\\";
    else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(static_cast<unsigned char>(c)));
      o += buf;
    } else o += c;
  }
  return o;
}

// SQL's string literal: quoted, a quote doubled (llama-bench's printer does not double it).
std::string sql_quote(const std::string& s) {
  std::string o = "'";
  for (const char c : s) {
    if (c == '\'') o += '\'';
    o += c;
  }
  return o + "'";
}

std::string csv_escape(const std::string& s) {
  std::string o = "\"";
  for (const char c : s) {
    if (c == '"') o += '"';
    o += c;
  }
  return o + "\"";
}

// Field values as strings, and their kind: a JSON number unless text; SQL's column type.
enum class Kind { text, integer, real };
struct Field {
  std::string value;
  Kind kind;
};
constexpr Kind T = Kind::text, I = Kind::integer, R = Kind::real;

std::string num(uint64_t v) { return std::to_string(v); }
std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6f", v);
  return buf;
}

std::vector<Field> values(const BenchRecord& r) {
  const BenchTest& t = r.test;
  return {{build_commit(), T},
          {std::to_string(build_number()), I},
          {bench_cpu_info(), T},
          {"CPU", T},
          {r.model.filename, T},
          {r.model.type, T},
          {num(r.model.size), I},
          {num(r.model.n_params), I},
          {std::to_string(t.threads), I},
          {"f16", T},
          {"f16", T},
          {std::to_string(t.n_prompt), I},
          {std::to_string(t.n_gen), I},
          {std::to_string(t.n_depth), I},
          {r.test_time, T},
          {num(r.avg_ns()), I},
          {num(r.stddev_ns()), I},
          {num(r.avg_ts()), R},
          {num(r.stddev_ts()), R},
          {r.simd, T},
          {model::kNumericsContract, T}};
}

template <class T>
std::string join(const std::vector<T>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += sep;
    if constexpr (std::is_same_v<T, double>) s += num(v[i]);
    else s += std::to_string(v[i]);
  }
  return s;
}

template <class T>
double mean_of(const std::vector<T>& v) {
  if (v.empty()) return 0;
  double s = 0;
  for (const T& x : v) s += double(x);
  return s / double(v.size());
}

template <class T>
double stddev_of(const std::vector<T>& v) {
  if (v.size() <= 1) return 0;
  const double m = mean_of(v);
  double s = 0;
  for (const T& x : v) s += (double(x) - m) * (double(x) - m);
  return std::sqrt(s / double(v.size() - 1));
}

}  // namespace

BenchModelInfo bench_model_info(const model::Model& model, const std::string& filename) {
  BenchModelInfo info;
  info.filename = printable(filename);
  const gguf::GgufFile& f = model.file();
  std::map<uint32_t, uint64_t> bytes_by_type;
  for (const gguf::TensorInfo& t : f.tensors()) {
    info.size += t.n_bytes;
    info.n_params += t.n_elements();
    if (t.shape.size() >= 2) bytes_by_type[uint32_t(t.type)] += t.n_bytes;
  }
  std::string ft = ftype_name(f.get_int_or("general.file_type", -1));
  if (ft.empty() && !bytes_by_type.empty()) {
    const auto most = std::max_element(bytes_by_type.begin(), bytes_by_type.end(),
                                       [](const auto& a, const auto& b) { return a.second < b.second; });
    ft = upper(gguf::type_name(most->first));
  }
  const std::string label = f.get_string_or("general.size_label", size_label(info.n_params));
  info.type = printable(std::string(model::arch_name(model.config().arch)) + " " + label + " " + (ft.empty() ? "?" : ft));
  return info;
}

uint64_t BenchRecord::avg_ns() const { return uint64_t(mean_of(samples_ns)); }
uint64_t BenchRecord::stddev_ns() const { return uint64_t(stddev_of(samples_ns)); }
std::vector<double> BenchRecord::samples_ts() const {
  std::vector<double> ts;
  const double n = double(test.n_prompt + test.n_gen);
  for (uint64_t ns : samples_ns) ts.push_back(ns ? 1e9 * n / double(ns) : 0.0);
  return ts;
}
double BenchRecord::avg_ts() const { return mean_of(samples_ts()); }
double BenchRecord::stddev_ts() const { return stddev_of(samples_ts()); }

BenchRecord run_bench(const std::shared_ptr<const model::Model>& model, const BenchModelInfo& info,
                      const BenchTest& test, bool allow_past_context) {
  BenchRecord r;
  r.model = info;
  r.test = test;
  model::BenchTiming timing = model::time_bench(model, test, allow_past_context);
  r.simd = std::move(timing.simd);
  r.test_time = std::move(timing.test_time);
  r.samples_ns = std::move(timing.samples_ns);
  return r;
}

std::string bench_cpu_info() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) {
      const size_t c = line.find(':');
      if (c == std::string::npos) break;
      std::string v = line.substr(c + 1);
      v.erase(0, v.find_first_not_of(" \t"));
      std::string clean;
      for (const char ch : v)
        if (static_cast<unsigned char>(ch) >= 0x20 && ch != 0x7f) clean += ch;
      return clean.empty() ? "unknown" : clean;
    }
  return "unknown";
}

BenchFormat parse_bench_format(const std::string& s) {
  if (s == "md") return BenchFormat::md;
  if (s == "csv") return BenchFormat::csv;
  if (s == "json") return BenchFormat::json;
  if (s == "jsonl") return BenchFormat::jsonl;
  if (s == "sql") return BenchFormat::sql;
  fail_field("bench", "-o", "md, csv, json, jsonl or sql", s);
}

const std::vector<std::string>& bench_fields() {
  static const std::vector<std::string> f = {
      "build_commit", "build_number", "cpu_info", "backends",  "model_filename", "model_type", "model_size", "model_n_params",
      "n_threads", "type_k",   "type_v",         "n_prompt",   "n_gen",      "n_depth",
      "test_time", "avg_ns",   "stddev_ns",      "avg_ts",     "stddev_ts",  "simd",
      "numerics"};
  return f;
}

namespace {
// Markdown columns: name, width (negative: left-aligned), as llama-bench's markdown_printer.
const std::vector<std::pair<std::string, int>>& md_columns() {
  static const std::vector<std::pair<std::string, int>> c = {
      {"model", -30}, {"size", 10}, {"params", 10}, {"backend", -10}, {"threads", 7},
      {"simd", -10},  {"test", 15}, {"t/s", 20}};
  return c;
}

std::string pad(const std::string& s, int width, int extra_bytes = 0) {
  const size_t w = size_t(std::abs(width) + extra_bytes);
  if (s.size() >= w) return s;
  return width < 0 ? s + std::string(w - s.size(), ' ') : std::string(w - s.size(), ' ') + s;
}
}  // namespace

std::string bench_header(BenchFormat f) {
  switch (f) {
    case BenchFormat::csv: {
      std::string s;
      for (size_t i = 0; i < bench_fields().size(); ++i) s += (i ? "," : "") + bench_fields()[i];
      return s + "\n";
    }
    case BenchFormat::json: return "[\n";
    case BenchFormat::sql: {
      // llama-bench's sql printer: one table named test, a column per field.
      const std::vector<Field> kinds = values(BenchRecord{});
      std::string s = "CREATE TABLE IF NOT EXISTS test (\n";
      for (size_t i = 0; i < bench_fields().size(); ++i)
        s += "  " + bench_fields()[i] + " " +
             (kinds[i].kind == T ? "TEXT" : kinds[i].kind == I ? "INTEGER" : "REAL") +
             (i + 1 < bench_fields().size() ? ",\n" : "\n");
      return s + ");\n\n";
    }
    case BenchFormat::jsonl: return "";
    case BenchFormat::md: {
      std::string a = "|", b = "|";
      for (const auto& [name, w] : md_columns()) {
        a += " " + pad(name, w) + " |";
        b += " " + std::string(size_t(std::abs(w) - 1), '-') + (w > 0 ? ":" : "-") + " |";
      }
      return a + "\n" + b + "\n";
    }
  }
  return "";
}

std::string bench_record(BenchFormat f, const BenchRecord& r, bool first) {
  const std::vector<Field> v = values(r);
  const std::vector<std::string>& names = bench_fields();
  switch (f) {
    case BenchFormat::csv: {
      std::string s;
      for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + csv_escape(v[i].value);
      return s + "\n";
    }
    case BenchFormat::sql: {
      std::string s = "INSERT INTO test (";
      for (size_t i = 0; i < names.size(); ++i) s += (i ? ", " : "") + names[i];
      s += ") VALUES (";
      for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + sql_quote(v[i].value);
      return s + ");\n";
    }
    case BenchFormat::json:
    case BenchFormat::jsonl: {
      const bool pretty = f == BenchFormat::json;
      std::string s = pretty ? (first ? "  {\n" : ",\n  {\n") : "{";
      for (size_t i = 0; i < v.size(); ++i) {
        const std::string val = v[i].kind != T ? v[i].value : "\"" + json_escape(v[i].value) + "\"";
        s += pretty ? "    \"" + names[i] + "\": " + val + ",\n" : "\"" + names[i] + "\": " + val + ", ";
      }
      s += std::string(pretty ? "    " : "") + "\"samples_ns\": [ " + join(r.samples_ns, ", ") + " ]," +
           (pretty ? "\n    " : " ") + "\"samples_ts\": [ " + join(r.samples_ts(), ", ") + " ]";
      return s + (pretty ? "\n  }" : "}\n");
    }
    case BenchFormat::md: {
      char buf[128];
      std::vector<std::string> cells;
      cells.push_back(r.model.type);
      const double size = double(r.model.size);
      if (size < 1024.0 * 1024 * 1024) std::snprintf(buf, sizeof buf, "%.2f MiB", size / 1024 / 1024);
      else std::snprintf(buf, sizeof buf, "%.2f GiB", size / 1024 / 1024 / 1024);
      cells.push_back(buf);
      const double np = double(r.model.n_params);
      if (np < 1e9) std::snprintf(buf, sizeof buf, "%.2f M", np / 1e6);
      else std::snprintf(buf, sizeof buf, "%.2f B", np / 1e9);
      cells.push_back(buf);
      cells.push_back("CPU");
      cells.push_back(std::to_string(r.test.threads));
      cells.push_back(r.simd);
      std::string test = r.test.n_gen == 0     ? "pp" + std::to_string(r.test.n_prompt)
                         : r.test.n_prompt == 0 ? "tg" + std::to_string(r.test.n_gen)
                                                : "pp" + std::to_string(r.test.n_prompt) + "+tg" +
                                                      std::to_string(r.test.n_gen);
      if (r.test.n_depth > 0) test += " @ d" + std::to_string(r.test.n_depth);
      cells.push_back(test);
      std::snprintf(buf, sizeof buf, "%.2f \xc2\xb1 %.2f", r.avg_ts(), r.stddev_ts());
      cells.push_back(buf);
      std::string s = "|";
      for (size_t i = 0; i < cells.size(); ++i) {
        const int w = md_columns()[i].second;
        s += " " + pad(cells[i], w, md_columns()[i].first == "t/s" ? 1 : 0) + " |";
      }
      return s + "\n";
    }
  }
  return "";
}

std::string bench_footer(BenchFormat f) {
  if (f == BenchFormat::json) return "\n]\n";
  // llama-bench's Markdown footer: the build the table came from.
  if (f == BenchFormat::md) return "\nbuild: " + std::string(build_commit()) + " (" + std::to_string(build_number()) + ")\n";
  return "";
}

}  // namespace ember::perf
