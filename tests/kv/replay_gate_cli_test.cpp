// The exact-replay gate as users run it (three processes of the ember binary), over a fast
// subset of the matrix; the full matrix is scripts/replay-matrix.sh. Plus the CLI's
// fail-closed paths and a kill -9 during export.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "kv/kv_test_util.h"
#include "kv/state.h"
#include "support/cli_run.h"
#include "support/test_support.h"
#include "util/sha256.h"
#include "util/simd.h"

namespace ember::test {
namespace {

namespace fs = std::filesystem;

const char* kEnglish = "Once upon a time, a little fox found a red ball in the park.";
const char* kArabic = "كان يا ما كان، في قديم الزمان، ولد صغير يحب القراءة.";

// A small synthetic model made by `ember model synth` (k-quants need rows of 256).
std::string synth(const std::string& arch, const std::string& type, const std::string& dir) {
  const std::string out = dir + "/" + arch + "-" + type + ".gguf";
  std::string cmd = ember_binary() + " model synth --arch " + arch + " --layers 2 --hidden 256 --heads 4 --kv-heads 2 " +
                    "--ffn 256 --vocab 320 --type " + type + " --seed 5 -o " + out;
  if (arch == "qwen2") cmd += " --qkv-bias --tied";
  if (arch == "qwen3") cmd += " --qk-norm";
  std::string log;
  EXPECT_EQ(run_command(cmd, &log), 0) << log;
  return out;
}

void expect_gate_passes(const std::string& model, const std::string& prompt, int n, const std::string& extra = "") {
  const std::string out = temp_dir("gate");
  std::string log;
  const int rc = run_command(ember_binary() + " kv validate-replay --model " + model + " --prompt " + q(prompt) +
                                 " -n " + std::to_string(n) + " -o " + out + " --force " + extra,
                             &log);
  EXPECT_EQ(rc, 0) << log;
  EXPECT_NE(log.find("pass: native["), std::string::npos) << log;
  const auto receipt = nlohmann::json::parse(slurp(out + "/receipt.json"));
  EXPECT_EQ(receipt["result"], "pass");
  EXPECT_EQ(receipt["differing_values"], 0);
  EXPECT_EQ(receipt["rows"], n);
  EXPECT_TRUE(receipt["first_mismatch"].is_null());
  EXPECT_EQ(kv::verify_snapshot(out + "/snapshot").error, "");
}

TEST(ReplayGateCli, RealModelEnglishAndArabic) {
  const std::string f32 = shared_path("models/stories260K.gguf");
  expect_gate_passes(f32, kEnglish, 12, "--threads 1 --export-threads 2");
  expect_gate_passes(shared_path("models/stories260K-Q8_0.gguf"), kArabic, 8, "--threads 2 --replay-threads 1");
  expect_gate_passes(shared_path("models/stories260K-Q4_K_M.gguf"), kEnglish, 6);
}

// --messages as run and kv export take it: the conversation through the chat template (here
// Qwen3's, from its tokenizer_config.json), forwarded with its render options to both
// processes; the receipt hashes the rendered prompt.
TEST(ReplayGateCli, MessagesThroughTheChatTemplate) {
  const std::string dir = temp_dir("gate_messages");
  const std::string conv = dir + "/conv.json";
  {
    std::ofstream f(conv);
    f << R"([{"role": "user", "content": "Once upon a time"}])";
  }
  const std::string cfg = shared_path("tokenizer/qwen3/tokenizer_config.json");
  std::string log;
  const int rc = run_command(ember_binary() + " kv validate-replay --model " + shared_path("models/stories260K.gguf") +
                                 " --messages " + q(conv) + " --tokenizer-config " + q(cfg) +
                                 " --add-generation-prompt -n 4 --threads 1 -o " + dir + "/gate",
                             &log);
  EXPECT_EQ(rc, 0) << log;
  std::string rendered;
  ASSERT_EQ(run_command(ember_binary() + " template render --tokenizer-config " + q(cfg) + " --messages " + q(conv) +
                            " --add-generation-prompt",
                        &rendered),
            0);
  const auto receipt = nlohmann::json::parse(slurp(dir + "/gate/receipt.json"));
  EXPECT_EQ(receipt["result"], "pass");
  EXPECT_EQ(receipt["prompt_sha256"], sha256_hex(rendered));
  EXPECT_NE(run_command(ember_binary() + " kv validate-replay --model m --messages c --prompt p -n 2 -o " + dir + "/x",
                        &log),
            0);
}

TEST(ReplayGateCli, SyntheticArchitecturesAndKQuants) {
  const std::string dir = temp_dir("synth");
  expect_gate_passes(synth("qwen2", "q8_0", dir), kArabic, 6, "--threads 1 --export-threads 2");
  expect_gate_passes(synth("qwen3", "q4_k", dir), kEnglish, 6, "--threads 2 --replay-threads 1");
  expect_gate_passes(synth("llama", "q6_k", dir), kEnglish, 6);
}

TEST(ReplayGateCli, AcrossSimdPaths) {
  // The numerics contract: export on the best path, replay on scalar, still bit-exact.
  const std::string best = simd_name(detect_simd());
  expect_gate_passes(shared_path("models/stories260K.gguf"), kEnglish, 8,
                     "--native-simd " + best + " --export-simd " + best + " --replay-simd scalar --replay-threads 3");
}

// Issue 32: `--replay-simd neon` exited 1 (a check failed) after two processes had run; it is
// bad input, refused before anything runs, exit 2.
TEST(ReplayGateCli, UnknownSimdPathIsBadInput) {
  const std::string out = temp_dir("gate-neon") + "/run";
  std::string log;
  const int rc = run_command(ember_binary() + " kv validate-replay --model /nonexistent.gguf --prompt hi -n 2 -o " +
                                 out + " --replay-simd neon",
                             &log);
  EXPECT_EQ(rc, 2) << log;
  EXPECT_EQ(log, "ember: validate-replay: --replay-simd: expected scalar, avx2, avxvnni, avxvnni-evex, avx512 or avx512vnni, found 'neon'\n");
  EXPECT_FALSE(fs::exists(out));
}

TEST(KvCli, ExportReplayAndFailClosedPaths) {
  const std::string model = shared_path("models/stories260K.gguf");
  const std::string dir = temp_dir("cli");
  std::string log;
  ASSERT_EQ(run_command(ember_binary() + " kv export --model " + model + " --prompt 'Once upon a time' --output " +
                            dir + "/s --threads 1", &log), 0) << log;
  EXPECT_NE(log.find("resume token"), std::string::npos) << log;
  // Refuses to overwrite without --force.
  EXPECT_EQ(run_command(ember_binary() + " kv export --model " + model + " --prompt x --output " + dir + "/s", &log), 2);
  EXPECT_NE(log.find("--force"), std::string::npos) << log;
  // Replay prints the continuation (the resume token first).
  ASSERT_EQ(run_command(ember_binary() + " kv replay --snapshot " + dir + "/s --model " + model + " -n 8", &log), 0) << log;
  EXPECT_NE(log.find(", there was a little girl"), std::string::npos) << log;
  // --arch is an assertion.
  EXPECT_EQ(run_command(ember_binary() + " kv replay --snapshot " + dir + "/s --model " + model + " --arch qwen2", &log), 2);
  EXPECT_NE(log.find("architecture: expected qwen2 (--arch), found llama"), std::string::npos) << log;
  // Another model (same geometry, other weights) is refused before decoding.
  EXPECT_EQ(run_command(ember_binary() + " kv replay --snapshot " + dir + "/s --model " +
                            shared_path("models/stories260K-kjv-top.gguf"), &log), 2);
  EXPECT_NE(log.find("model.identity: expected "), std::string::npos) << log;
  EXPECT_EQ(log.find(", there"), std::string::npos) << log;
  // A corrupted payload is refused by replay too.
  std::string b = slurp(dir + "/s/keys.f16le");
  b[5] ^= 4;
  spit(dir + "/s/keys.f16le", b);
  EXPECT_EQ(run_command(ember_binary() + " kv replay --snapshot " + dir + "/s --model " + model, &log), 2);
  EXPECT_NE(log.find("keys.f16le: proof.blocks[0]"), std::string::npos) << log;  // names the block
}

TEST(KvCli, SlowKillDuringExportLeavesNothingOrACompleteSnapshot) {
  // A slow export (a 2048-token prefix on a synthetic model) killed with SIGKILL at
  // increasing delays: each time, the target is absent or verifies completely. Most kills
  // land in the prefill (writing takes milliseconds); the last run is given time to finish.
  const std::string dir = temp_dir("kill");
  const std::string model = dir + "/m.gguf";
  std::string log;
  ASSERT_EQ(run_command(ember_binary() + " model synth --arch llama --layers 4 --hidden 256 --heads 4 --kv-heads 4 "
                            "--ffn 256 --vocab 300 --type q8_0 --seed 3 -o " + model, &log), 0) << log;
  std::string ids;
  for (int i = 0; i < 2048; ++i) ids += (i ? "," : "") + std::to_string(1 + (i * 37) % 250);
  int absent = 0, complete = 0;
  for (int delay_ms : {5, 30, 100, 300, 1000, 30000}) {
    const std::string out = dir + "/snap" + std::to_string(delay_ms);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const std::string bin = ember_binary();
      ::execl(bin.c_str(), bin.c_str(), "kv", "export", "--model", model.c_str(), "--prompt-ids", ids.c_str(),
              "--threads", "1", "--output", out.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    int status = 0;
    bool killed = false;
    const auto t0 = std::chrono::steady_clock::now();
    while (::waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() - t0 > std::chrono::milliseconds(delay_ms)) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        killed = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!killed) {
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
      EXPECT_TRUE(fs::exists(out));
    }
    if (!fs::exists(out)) {
      ++absent;
    } else {
      EXPECT_EQ(kv::verify_snapshot(out).error, "") << "delay " << delay_ms;
      ++complete;
    }
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string name = e.path().filename().string();
      if (name.rfind(".snap", 0) == 0) fs::remove_all(e.path());  // a killed writer's hidden temporary
    }
  }
  EXPECT_GE(absent, 1);  // the early kills stop it before the rename
  EXPECT_EQ(absent + complete, 6);
}

}  // namespace
}  // namespace ember::test
