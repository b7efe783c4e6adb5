#include "kv/gate_process.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <utility>

#include "kv/replay_gate.h"
#include "kv/state.h"
#include "kv/strict_json.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/sha256.h"
#include "util/simd.h"

namespace ember::kv {
namespace {

// fork + exec of the executable; stdout/stderr go to step.log. Returns the exit status.
int spawn(const std::string& executable, GateStep& s) {
  std::vector<char*> argv;
  for (auto& a : s.argv) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) fail("validate-replay", std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    const int fd = ::open(s.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    if (s.simd.empty()) ::unsetenv("EMBER_SIMD"); else ::setenv("EMBER_SIMD", s.simd.c_str(), 1);
    ::execv(executable.c_str(), argv.data());
    _exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) fail("validate-replay", std::string("waitpid failed: ") + std::strerror(errno));
  s.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  return s.exit_code;
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  const std::string s = read_file(path, size_t(4) << 30);
  return std::vector<uint8_t>(s.begin(), s.end());
}

std::string tail_of(const std::string& path) {
  std::string s;
  try {
    s = read_file(path, size_t(64) << 20);
  } catch (const Error&) {
    return "";
  }
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  const size_t nl = s.find_last_of('\n');
  return nl == std::string::npos ? s : s.substr(nl + 1);
}

// The files of a gate run, under OUT.
struct GateFiles {
  std::string native, boundary, replay, snapshot;
  explicit GateFiles(const std::string& out)
      : native(out + "/native.f32"), boundary(out + "/boundary.f32"), replay(out + "/replay.f32"),
        snapshot(out + "/snapshot") {}
};

}  // namespace

std::vector<GateStep> gate_steps(const GatePlan& a) {
  const GateFiles f(a.out);
  auto model_flags = [&](std::vector<std::string>& v, int threads) {
    v.insert(v.end(), {"--model", a.model});
    if (!a.tokenizer.empty()) v.insert(v.end(), {"--tokenizer", a.tokenizer});
    if (threads > 0) v.insert(v.end(), {"--threads", std::to_string(threads)});
  };
  // A process: `ember <command...> --model ... [--tokenizer] [--threads]`, then its own flags.
  auto step = [&](const char* role, int threads, const std::string& simd, std::vector<std::string> command) {
    GateStep s;
    s.role = role;
    s.threads = threads > 0 ? threads : a.threads;
    s.simd = simd;
    s.argv = {"ember"};
    s.argv.insert(s.argv.end(), command.begin(), command.end());
    model_flags(s.argv, s.threads);
    return s;
  };
  auto append = [](std::vector<std::string>& v, const std::vector<std::string>& more) {
    v.insert(v.end(), more.begin(), more.end());
  };
  std::vector<GateStep> steps;
  steps.push_back(step("native", a.native_threads, a.native_simd, {"run"}));
  append(steps[0].argv, a.prompt_flags);
  append(steps[0].argv, {"-n", std::to_string(a.n), "--ignore-eos", "--dump-logits", f.native, "--force", "--quiet"});
  steps.push_back(step("export", a.export_threads, a.export_simd, {"kv", "export"}));
  if (!a.arch.empty()) append(steps[1].argv, {"--arch", a.arch});
  append(steps[1].argv, a.prompt_flags);
  append(steps[1].argv, {"--output", f.snapshot, "--boundary-logits", f.boundary, "--force"});
  steps.push_back(step("replay", a.replay_threads, a.replay_simd, {"kv", "replay"}));
  if (!a.arch.empty()) append(steps[2].argv, {"--arch", a.arch});
  append(steps[2].argv, {"--snapshot", f.snapshot, "-n", std::to_string(a.n - 1), "--ignore-eos", "--logits-out",
                         f.replay, "--force"});
  return steps;
}

GateOutcome run_gate_processes(const GatePlan& a) {
  if (a.n < 2) fail_field("validate-replay", "-n", ">= 2 (one boundary row and at least one replay row)", std::to_string(a.n));
  // A child would refuse a bad EMBER_SIMD too, but only after the processes before it ran, and
  // as a failed step (exit 1) rather than as the bad input it is (exit 2).
  const std::pair<const std::string*, const char*> simd_flags[] = {
      {&a.native_simd, "--native-simd"}, {&a.export_simd, "--export-simd"}, {&a.replay_simd, "--replay-simd"}};
  for (const auto& [value, flag] : simd_flags)
    if (!value->empty()) parse_supported_simd(*value, "validate-replay", flag);
  namespace fs = std::filesystem;
  const std::string out = a.out;
  const std::string receipt = out + "/receipt.json";
  if (fs::exists(out) && !fs::is_empty(out) && !a.force)
    fail(out, "already exists and is not empty; refusing to overwrite it (pass --force to reuse it)");
  fs::create_directories(out);
  const GateFiles f(out);
  const std::string &native = f.native, &boundary = f.boundary, &replay = f.replay, &snapshot = f.snapshot;
  const std::string& prompt = a.prompt;
  std::vector<GateStep> steps = gate_steps(a);

  GateOutcome g;
  g.receipt_path = receipt;
  ordered_json r;
  r["kind"] = "ember.replay-gate";
  r["version"] = 1;
  r["model"] = a.model;
  r["tokenizer"] = a.tokenizer.empty() ? "gguf" : a.tokenizer;
  r["prompt_sha256"] = sha256_hex(prompt);
  r["n"] = a.n;
  std::string failed_step;
  for (GateStep& s : steps) {
    s.log = out + "/" + s.role + ".log";
    if (spawn(a.executable, s) != 0) {
      failed_step = s.role + " process exited with " + std::to_string(s.exit_code) + ": " + tail_of(s.log);
      break;
    }
  }
  ordered_json procs = ordered_json::array();
  for (const GateStep& s : steps) {
    ordered_json p = {{"role", s.role},
                          {"threads", s.threads > 0 ? std::to_string(s.threads) : "default"},
                          {"simd", s.simd.empty() ? "default" : s.simd},
                          {"exit_code", s.exit_code}};
    ordered_json argv = ordered_json::array();
    for (size_t i = 1; i < s.argv.size(); ++i) argv.push_back(s.argv[i]);
    p["argv"] = argv;
    procs.push_back(p);
  }
  r["processes"] = procs;
  if (!failed_step.empty()) {
    r["result"] = "error";
    r["error"] = failed_step;
    g.summary = "error: " + failed_step;
  } else {
    const SnapshotManifest m = read_state_header(snapshot, Accept::native).header.manifest;
    r["model_identity"] = m.model.identity;
    r["tokenizer_identity"] = m.tokenizer.identity;
    r["engine_fingerprint"] = m.numerics.engine_fingerprint;
    r["prefix"] = {{"count", m.geometry.positions}, {"sha256", m.prefix.sha256}};
    r["resume"] = {{"token", m.resume.token}, {"position", m.resume.position}};
    const std::vector<uint8_t> nb = read_bytes(native), bb = read_bytes(boundary), rb = read_bytes(replay);
    r["files"] = {{"native", {{"rows", a.n}, {"sha256", sha256_hex(nb.data(), nb.size())}}},
                  {"boundary", {{"rows", 1}, {"sha256", sha256_hex(bb.data(), bb.size())}}},
                  {"replay", {{"rows", a.n - 1}, {"sha256", sha256_hex(rb.data(), rb.size())}}}};
    const GateVerdict v = compare_replay_logits(nb, bb, rb, a.n);
    const ordered_json verdict = verdict_json(v);
    for (auto it = verdict.begin(); it != verdict.end(); ++it) r[it.key()] = it.value();
    g.pass = v.pass;
    if (v.pass) {
      g.summary = "pass: native[" + std::to_string(a.n) + "," + std::to_string(v.vocab) +
                  "] == concat(boundary[1], replay[" + std::to_string(a.n - 1) + "]) bit for bit (prefix " +
                  std::to_string(m.geometry.positions) + " tokens)";
    } else if (!v.shape_error.empty()) {
      g.summary = "fail: " + v.shape_error;
    } else {
      const auto& mm = *v.first_mismatch;
      char buf[160];
      std::snprintf(buf, sizeof buf, "fail: %llu values differ; first at row %d (%s), token %d: 0x%08x vs 0x%08x",
                    static_cast<unsigned long long>(v.differing_values), mm.row, mm.source.c_str(), mm.column,
                    mm.native_bits, mm.resumed_bits);
      g.summary = buf;
    }
  }
  write_file_atomic(receipt, pretty_json(r), true);
  return g;
}

}  // namespace ember::kv
