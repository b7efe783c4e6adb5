#pragma once
// `ember bench`'s report, in llama-bench's layouts (CSV, JSON, JSONL, Markdown) with its field
// names for the fields the two share, plus ember's own (simd, numerics), so that the two
// engines are compared with the same command line and the same columns (docs/engine.md,
// "ember bench"). The timing itself is model/bench.h; this layer adds what describes the run
// (the CPU from /proc/cpuinfo, the model file) and writes it.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/bench.h"

namespace ember::perf {

// What llama-bench reports about a model file.
struct BenchModelInfo {
  std::string filename;  // model_filename: the path as given
  std::string type;      // model_type: "<arch> <size> <file type>", as llama_model_desc
  uint64_t size = 0;     // model_size: bytes of every tensor's data
  uint64_t n_params = 0; // model_n_params: elements of every tensor
};
BenchModelInfo bench_model_info(const model::Model& model, const std::string& filename);

struct BenchRecord {
  BenchModelInfo model;
  model::BenchTest test;
  std::string simd;       // the SIMD path the engine ran on
  std::string test_time;  // RFC 3339, UTC, when the test started
  std::vector<uint64_t> samples_ns;

  uint64_t avg_ns() const;
  uint64_t stddev_ns() const;
  std::vector<double> samples_ts() const;  // (n_prompt + n_gen) tokens per second per sample
  double avg_ts() const;
  double stddev_ts() const;  // sample standard deviation (n - 1), 0 for one sample
};

// model::time_bench, recorded with the model's description.
BenchRecord run_bench(const std::shared_ptr<const model::Model>& model, const BenchModelInfo& info,
                      const model::BenchTest& test, bool allow_past_context = false);

// The CPU's model name (/proc/cpuinfo), llama-bench's cpu_info; "unknown" where unreadable.
std::string bench_cpu_info();

enum class BenchFormat { md, csv, json, jsonl, sql };
BenchFormat parse_bench_format(const std::string& s);  // Error naming -o otherwise

// Writers: header() before the first record, record() for each, footer() after the last
// (Markdown's is llama-bench's "build: COMMIT (NUMBER)" line).
std::string bench_header(BenchFormat f);
std::string bench_record(BenchFormat f, const BenchRecord& r, bool first);
std::string bench_footer(BenchFormat f);

// The field names of the CSV/JSON/SQL output, in order (llama-bench's names where shared;
// build_commit and build_number name ember's source, util/build_info.h).
const std::vector<std::string>& bench_fields();

}  // namespace ember::perf
