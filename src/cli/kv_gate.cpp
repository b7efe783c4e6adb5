#include "cli/kv_gate.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "cli/prompt_text.h"
#include "template/chat_template.h"
#include "kv/replay_gate.h"
#include "kv/state.h"
#include "kv/strict_json.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/sha256.h"

namespace ember::cli {
namespace {

struct Step {
  std::string role;  // native | export | replay
  std::vector<std::string> argv;
  int threads = 0;
  std::string simd;
  std::string log;
  int exit_code = -1;
};

// fork + exec of this executable; stdout/stderr go to step.log. Returns the exit status.
int spawn(Step& s) {
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
    ::execv("/proc/self/exe", argv.data());
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

}  // namespace

GateOutcome run_replay_gate(const GateArgs& a) {
  if (a.n < 2) fail_field("validate-replay", "-n", ">= 2 (one boundary row and at least one replay row)", std::to_string(a.n));
  namespace fs = std::filesystem;
  const std::string out = a.out;
  const std::string receipt = out + "/receipt.json";
  if (fs::exists(out) && !fs::is_empty(out) && !a.force)
    fail(out, "already exists and is not empty; refusing to overwrite it (pass --force to reuse it)");
  fs::create_directories(out);
  // The prompt flags both the run and the export get: the text, or the conversation and its
  // render options (rendered here once too, for the receipt's hash and to fail before spawning).
  std::string prompt;
  std::vector<std::string> prompt_flags;
  if (!a.messages.empty()) {
    ChatTemplateArgs chat = a.chat;
    chat.model = a.model;
    prompt = tmpl::render(load_chat_template(chat, "validate-replay"), tmpl::read_messages_file(a.messages),
                          render_options(chat));
    prompt_flags = {"--messages", a.messages};
    if (!a.chat.tokenizer_config.empty()) prompt_flags.insert(prompt_flags.end(), {"--tokenizer-config", a.chat.tokenizer_config});
    if (a.chat.add_generation_prompt) prompt_flags.push_back("--add-generation-prompt");
    if (!a.chat.enable_thinking.empty()) prompt_flags.insert(prompt_flags.end(), {"--enable-thinking", a.chat.enable_thinking});
    if (!a.chat.date_string.empty()) prompt_flags.insert(prompt_flags.end(), {"--date-string", a.chat.date_string});
  } else {
    prompt = !a.prompt_file.empty() ? read_prompt_file(a.prompt_file) : checked_prompt_text(a.prompt, "--prompt");
    prompt_flags = {"--prompt", prompt};
  }
  const std::string native = out + "/native.f32", boundary = out + "/boundary.f32",
                    replay = out + "/replay.f32", snapshot = out + "/snapshot";
  auto model_flags = [&](std::vector<std::string>& v, int threads) {
    v.insert(v.end(), {"--model", a.model});
    if (!a.tokenizer.empty()) v.insert(v.end(), {"--tokenizer", a.tokenizer});
    if (threads > 0) v.insert(v.end(), {"--threads", std::to_string(threads)});
  };
  auto pick = [&](int specific) { return specific > 0 ? specific : a.threads; };
  std::vector<Step> steps(3);
  steps[0].role = "native";
  steps[0].threads = pick(a.native_threads);
  steps[0].simd = a.native_simd;
  steps[0].argv = {"ember", "run"};
  model_flags(steps[0].argv, steps[0].threads);
  steps[0].argv.insert(steps[0].argv.end(), prompt_flags.begin(), prompt_flags.end());
  steps[0].argv.insert(steps[0].argv.end(), {"-n", std::to_string(a.n), "--ignore-eos",
                                             "--dump-logits", native, "--force", "--quiet"});
  steps[1].role = "export";
  steps[1].threads = pick(a.export_threads);
  steps[1].simd = a.export_simd;
  steps[1].argv = {"ember", "kv", "export"};
  model_flags(steps[1].argv, steps[1].threads);
  if (!a.arch.empty()) steps[1].argv.insert(steps[1].argv.end(), {"--arch", a.arch});
  steps[1].argv.insert(steps[1].argv.end(), prompt_flags.begin(), prompt_flags.end());
  steps[1].argv.insert(steps[1].argv.end(), {"--output", snapshot, "--boundary-logits",
                                             boundary, "--force"});
  steps[2].role = "replay";
  steps[2].threads = pick(a.replay_threads);
  steps[2].simd = a.replay_simd;
  steps[2].argv = {"ember", "kv", "replay"};
  model_flags(steps[2].argv, steps[2].threads);
  if (!a.arch.empty()) steps[2].argv.insert(steps[2].argv.end(), {"--arch", a.arch});
  steps[2].argv.insert(steps[2].argv.end(), {"--snapshot", snapshot, "-n", std::to_string(a.n - 1),
                                             "--ignore-eos", "--logits-out", replay, "--force"});

  GateOutcome g;
  g.receipt_path = receipt;
  kv::ordered_json r;
  r["kind"] = "ember.replay-gate";
  r["version"] = 1;
  r["model"] = a.model;
  r["tokenizer"] = a.tokenizer.empty() ? "gguf" : a.tokenizer;
  r["prompt_sha256"] = sha256_hex(prompt);
  r["n"] = a.n;
  std::string failed_step;
  for (Step& s : steps) {
    s.log = out + "/" + s.role + ".log";
    if (spawn(s) != 0) {
      failed_step = s.role + " process exited with " + std::to_string(s.exit_code) + ": " + tail_of(s.log);
      break;
    }
  }
  kv::ordered_json procs = kv::ordered_json::array();
  for (const Step& s : steps) {
    kv::ordered_json p = {{"role", s.role},
                          {"threads", s.threads > 0 ? std::to_string(s.threads) : "default"},
                          {"simd", s.simd.empty() ? "default" : s.simd},
                          {"exit_code", s.exit_code}};
    kv::ordered_json argv = kv::ordered_json::array();
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
    const kv::SnapshotManifest m = kv::read_state_header(snapshot, kv::Accept::native).header.manifest;
    r["model_identity"] = m.model.identity;
    r["tokenizer_identity"] = m.tokenizer.identity;
    r["engine_fingerprint"] = m.numerics.engine_fingerprint;
    r["prefix"] = {{"count", m.geometry.positions}, {"sha256", m.prefix.sha256}};
    r["resume"] = {{"token", m.resume.token}, {"position", m.resume.position}};
    const std::vector<uint8_t> nb = read_bytes(native), bb = read_bytes(boundary), rb = read_bytes(replay);
    r["files"] = {{"native", {{"rows", a.n}, {"sha256", sha256_hex(nb.data(), nb.size())}}},
                  {"boundary", {{"rows", 1}, {"sha256", sha256_hex(bb.data(), bb.size())}}},
                  {"replay", {{"rows", a.n - 1}, {"sha256", sha256_hex(rb.data(), rb.size())}}}};
    const kv::GateVerdict v = kv::compare_replay_logits(nb, bb, rb, a.n);
    const kv::ordered_json verdict = kv::verdict_json(v);
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
  write_file_atomic(receipt, kv::pretty_json(r), true);
  return g;
}

}  // namespace ember::cli
