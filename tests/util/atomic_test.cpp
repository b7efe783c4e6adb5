// Issue 12, defects 1, 10 and 11 (output paths): concurrent writers of one path, temporaries of
// live and dead writers, forced replacement by exchange, parent creation, error messages that
// name the user's path, and an output that is an input.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/test_support.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace ember {
namespace {

using test::error_of;

namespace fs = std::filesystem;

// What the directories these tests write hold, for --force (DirectoryKind in util/atomic_file.h).
DirectoryKind test_kind(std::vector<std::string> entries) {
  return DirectoryKind::fixed("a test directory", std::move(entries));
}

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Exit codes of the writer children.
constexpr int kWon = 0, kExists = 1, kOtherError = 2;

int code_of(const Error& e) {
  return std::string(e.what()).find("already exists") != std::string::npos ? kExists : kOtherError;
}

// Forks n writers. Each runs prepare(i) (construct and write), reports ready, waits until
// every writer is ready, then runs the publish step prepare returned. So all n temporaries
// exist before the first commit: the race is real every run. The writers below also sweep
// the path (as kv::write_snapshot did before each write) while the others are live.
// Returns the children's exit codes.
std::vector<int> race_writers(int n, const std::function<std::function<void()>(int)>& prepare) {
  int ready[2], go[2];
  EXPECT_EQ(::pipe(ready), 0);
  EXPECT_EQ(::pipe(go), 0);
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(ready[0]);
      ::close(go[1]);
      int code = kWon;
      std::function<void()> publish;
      try {
        publish = prepare(i);
      } catch (const Error& e) {
        code = code_of(e) + 10;  // failed before the race
      }
      (void)!::write(ready[1], "r", 1);
      char c;
      (void)!::read(go[0], &c, 1);  // returns at EOF, when the parent closes its end
      if (code == kWon) {
        try {
          publish();
        } catch (const Error& e) {
          code = code_of(e);
        }
      }
      publish = nullptr;  // runs the writer's destructor (removes a losing temporary)
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  ::close(ready[1]);
  ::close(go[0]);
  char c;
  for (int got = 0; got < n && ::read(ready[0], &c, 1) == 1;) ++got;
  ::close(go[1]);
  ::close(ready[0]);
  std::vector<int> codes;
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status));
  }
  return codes;
}

TEST(AtomicConcurrency, DirectoryWritersOfOnePathGiveExactlyOneCompleteSnapshot) {
  const std::string dir = test::temp_dir("race-dir");
  const std::string path = dir + "/snap";
  const std::vector<std::string> files = {"keys.f16le", "values.f16le", "manifest.json"};
  const int n = 6;
  const std::vector<int> codes = race_writers(n, [&](int i) -> std::function<void()> {
    remove_stale_temporaries(path);
    auto d = std::make_shared<AtomicDirectory>(path, test_kind({"data"}), false);
    for (const std::string& name : files) {
      auto f = d->create(name);
      f->sink().write(std::string(size_t(1) << 16, char('A' + i)));
      f->commit();
    }
    return [d, path] {
      remove_stale_temporaries(path);  // as a writer starting now would, while the others are live
      d->commit();
    };
  });
  EXPECT_EQ(std::count(codes.begin(), codes.end(), kWon), 1);
  EXPECT_EQ(std::count(codes.begin(), codes.end(), kExists), n - 1);
  ASSERT_EQ(list_dir(dir), std::vector<std::string>{"snap"});  // no temporary left behind
  std::vector<std::string> sorted = files;
  std::sort(sorted.begin(), sorted.end());
  ASSERT_EQ(list_dir(path), sorted);
  // One writer's files, all of them complete.
  const std::string first = read_file(path + "/" + files[0]);
  ASSERT_EQ(first.size(), size_t(1) << 16);
  EXPECT_EQ(std::count(first.begin(), first.end(), first[0]), long(first.size()));
  for (const std::string& name : files) EXPECT_EQ(read_file(path + "/" + name), first) << name;
}

TEST(AtomicConcurrency, FileWritersOfOnePathGiveExactlyOneCompleteFile) {
  const std::string dir = test::temp_dir("race-file");
  const std::string path = dir + "/out.kvc";
  const int n = 6;
  const std::vector<int> codes = race_writers(n, [&](int i) -> std::function<void()> {
    remove_stale_temporaries(path);
    auto f = std::make_shared<AtomicFile>(path, false);
    f->sink().write(std::string(size_t(1) << 20, char('a' + i)));
    return [f, path] {
      remove_stale_temporaries(path);
      f->commit();
    };
  });
  EXPECT_EQ(std::count(codes.begin(), codes.end(), kWon), 1);
  EXPECT_EQ(std::count(codes.begin(), codes.end(), kExists), n - 1);
  ASSERT_EQ(list_dir(dir), std::vector<std::string>{"out.kvc"});
  const std::string got = read_file(path);
  ASSERT_EQ(got.size(), size_t(1) << 20);
  EXPECT_EQ(std::count(got.begin(), got.end(), got[0]), long(got.size()));
}

// The file-system fallback (no renameat2 flags): link() for files, rename() for directories
// still give one winner; forced replacement still works.
TEST(AtomicConcurrency, FallbackWithoutRenameat2StillGivesOneWinner) {
  const std::string dir = test::temp_dir("race-fallback");
  const std::string file = dir + "/out.bin", snap = dir + "/snap";
  atomic_set_renameat2_disabled_for_testing(true);
  const uint64_t fallbacks = atomic_publish_counts().fallback;
  const std::vector<int> file_codes = race_writers(4, [&](int i) -> std::function<void()> {
    auto f = std::make_shared<AtomicFile>(file, false);
    f->sink().write(std::string(4096, char('a' + i)));
    return [f] { f->commit(); };
  });
  const std::vector<int> dir_codes = race_writers(4, [&](int i) -> std::function<void()> {
    auto d = std::make_shared<AtomicDirectory>(snap, test_kind({"data"}), false);
    auto f = d->create("data");
    f->sink().write(std::string(4096, char('a' + i)));
    f->commit();
    return [d] { d->commit(); };
  });
  for (const auto* codes : {&file_codes, &dir_codes}) {
    EXPECT_EQ(std::count(codes->begin(), codes->end(), kWon), 1);
    EXPECT_EQ(std::count(codes->begin(), codes->end(), kExists), 3);
  }
  write_file_atomic(file, "forced", true);
  {
    AtomicDirectory d(snap, test_kind({"data"}), true);
    auto f = d.create("data");
    f->sink().write("forced");
    f->commit();
    d.commit();
  }
  EXPECT_GT(atomic_publish_counts().fallback, fallbacks);
  atomic_set_renameat2_disabled_for_testing(false);
  EXPECT_EQ(read_file(file), "forced");
  EXPECT_EQ(read_file(snap + "/data"), "forced");
  EXPECT_EQ(list_dir(dir), (std::vector<std::string>{"out.bin", "snap"}));
}

// A pid that has exited (reaped): its owner is certainly dead.
pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

TEST(AtomicTemporaries, SweepRemovesOnlyUnlockedTemporariesOfDeadWriters) {
  const std::string dir = test::temp_dir("sweep");
  const std::string final_path = dir + "/out";
  const std::string dead = std::to_string(dead_pid()), live = std::to_string(::getpid());
  auto make_file = [&](const std::string& name) {
    const int fd = ::open((dir + "/" + name).c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    EXPECT_GE(fd, 0) << name;
    return fd;
  };
  auto make_dir = [&](const std::string& name) {
    EXPECT_EQ(::mkdir((dir + "/" + name).c_str(), 0755), 0);
    ::close(make_file(name + "/payload"));
    return ::open((dir + "/" + name).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  };
  const std::string dead_file = ".out.tmp-" + dead + "-0", dead_dir = ".out.tmp-" + dead + "-1";
  const std::string locked_file = ".out.tmp-" + dead + "-2", locked_dir = ".out.tmp-" + dead + "-3";
  const std::string live_file = ".out.tmp-" + live + "-4", live_dir = ".out.tmp-" + live + "-5";
  const std::string odd = ".out.tmp-" + dead + "-x", other = ".other.tmp-" + dead + "-0";
  ::close(make_file(dead_file));
  ::close(make_dir(dead_dir));
  const int lf = make_file(locked_file), ld = make_dir(locked_dir);
  ASSERT_EQ(::flock(lf, LOCK_EX), 0);  // a writer whose pid we cannot see, but which holds its lock
  ASSERT_EQ(::flock(ld, LOCK_EX), 0);
  ::close(make_file(live_file));  // a live writer between creating its temporary and locking it
  ::close(make_dir(live_dir));
  ::close(make_file(odd));
  ::close(make_file(other));
  remove_stale_temporaries(final_path);
  std::vector<std::string> kept = {locked_file, locked_dir, live_file, live_dir, odd, other};
  std::sort(kept.begin(), kept.end());
  EXPECT_EQ(list_dir(dir), kept);
  ::close(lf);
  ::close(ld);
  remove_stale_temporaries(final_path);  // locks released, pid dead: now stale
  kept = {live_file, live_dir, odd, other};
  std::sort(kept.begin(), kept.end());
  EXPECT_EQ(list_dir(dir), kept);
}

// A writer in another, live process keeps its temporary through another writer's sweep and
// still publishes; the second writer is told the path exists.
TEST(AtomicTemporaries, LiveWritersTemporarySurvivesAnotherWritersSweep) {
  const std::string dir = test::temp_dir("live");
  const std::string path = dir + "/snap";
  int ready[2], go[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(go), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(ready[0]);
    ::close(go[1]);
    int code = kWon;
    try {
      AtomicDirectory d(path, test_kind({"data"}), false);
      auto f = d.create("data");
      f->sink().write("child");
      f->commit();
      (void)!::write(ready[1], "r", 1);
      char c;
      (void)!::read(go[0], &c, 1);
      d.commit();
    } catch (const Error& e) {
      code = code_of(e);
    }
    ::_exit(code);
  }
  ::close(ready[1]);
  ::close(go[0]);
  char c;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  remove_stale_temporaries(path);
  AtomicDirectory mine(path, test_kind({"data"}), false);  // sweeps too
  ASSERT_EQ(list_dir(dir).size(), 2u);  // the child's temporary and mine
  ::close(go[1]);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), kWon);
  EXPECT_EQ(read_file(path + "/data"), "child");
  const std::string msg = error_of([&] { mine.commit(); });
  EXPECT_EQ(msg, path + ": already exists; refusing to overwrite it (pass --force to replace it)");
}

// A writer killed with SIGKILL mid-write leaves a temporary; the next write of that path,
// single file or directory, removes it.
TEST(AtomicTemporaries, DeadWritersTemporaryIsRemovedByTheNextWrite) {
  const std::string dir = test::temp_dir("killed");
  const std::string file = dir + "/out.kvc", snap = dir + "/snap";
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    AtomicFile f(file, false);
    f.sink().write(std::string(1 << 16, 'x'));
    AtomicDirectory d(snap, test_kind({"keys"}), false);
    auto inner = d.create("keys");
    inner->sink().write(std::string(1 << 16, 'y'));
    (void)!::write(ready[1], "r", 1);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char c;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ::waitpid(child, &status, 0);
  const std::vector<std::string> left = list_dir(dir);
  ASSERT_EQ(left.size(), 2u);
  EXPECT_EQ(left[0].rfind(".out.kvc.tmp-" + std::to_string(child) + "-", 0), 0u) << left[0];
  EXPECT_EQ(left[1].rfind(".snap.tmp-" + std::to_string(child) + "-", 0), 0u) << left[1];
  write_file_atomic(file, "next", false);
  EXPECT_EQ(list_dir(dir).size(), 2u);  // the file's temporary is gone, the directory's not yet
  {
    AtomicDirectory d(snap, test_kind({"data"}), false);
    d.commit();
  }
  EXPECT_EQ(list_dir(dir), (std::vector<std::string>{"out.kvc", "snap"}));
}

// Whether this file system can exchange two names atomically (ext4, xfs, btrfs, tmpfs can).
bool has_rename_exchange(const std::string& dir) {
  const std::string a = dir + "/.probe-a", b = dir + "/.probe-b";
  ::close(::open(a.c_str(), O_WRONLY | O_CREAT, 0644));
  ::close(::open(b.c_str(), O_WRONLY | O_CREAT, 0644));
  const bool ok = ::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE) == 0;
  ::unlink(a.c_str());
  ::unlink(b.c_str());
  return ok;
}

// Defect 10: --force replaced a directory in two renames, with nothing at the path between
// them. With the exchange, a reader watching the path always finds a complete snapshot.
TEST(AtomicForce, ForcedReplacementNeverLeavesThePathEmpty) {
  const std::string dir = test::temp_dir("force");
  if (!has_rename_exchange(dir)) GTEST_SKIP() << dir << ": file system without RENAME_EXCHANGE";
  const std::string snap = dir + "/snap", file = dir + "/out.bin";
  auto write_snap = [&](int i, bool force) {
    AtomicDirectory d(snap, test_kind({"manifest.json"}), force);
    auto f = d.create("manifest.json");
    f->sink().write(std::to_string(i));
    f->commit();
    d.commit();
  };
  write_snap(0, false);
  write_file_atomic(file, "0", false);
  std::atomic<bool> stop{false};
  std::atomic<long> looks{0}, misses{0};
  std::thread watcher([&] {
    struct stat st {};
    while (!stop) {
      ++looks;
      if (::stat((snap + "/manifest.json").c_str(), &st) != 0) ++misses;
      if (::stat(file.c_str(), &st) != 0) ++misses;
    }
  });
  const uint64_t exchanges = atomic_publish_counts().exchange;
  const int rounds = 300;
  for (int i = 1; i <= rounds; ++i) {
    write_snap(i, true);
    write_file_atomic(file, std::to_string(i), true);
  }
  stop = true;
  watcher.join();
  EXPECT_GT(looks.load(), 0);
  EXPECT_EQ(misses.load(), 0) << "the path was missing during a forced replacement";
  EXPECT_EQ(atomic_publish_counts().exchange - exchanges, uint64_t(2 * rounds));
  EXPECT_EQ(read_file(snap + "/manifest.json"), std::to_string(rounds));
  EXPECT_EQ(read_file(file), std::to_string(rounds));
  EXPECT_EQ(list_dir(dir), (std::vector<std::string>{"out.bin", "snap"}));  // no old copy left
  // --force replaces only the same kind of thing.
  EXPECT_EQ(error_of([&] { write_file_atomic(snap, "x", true); }),
            snap + ": exists and is a directory; --force replaces only a file");
  EXPECT_EQ(error_of([&] { AtomicDirectory d(file, test_kind({"manifest.json"}), true); }),
            file + ": exists and is a regular file; --force replaces only a directory");
}

// Defect 11: `--output runs/kv/prefix` failed when runs/kv/ was missing.
TEST(AtomicPaths, MissingParentsAreCreated) {
  const std::string dir = test::temp_dir("parents");
  {
    AtomicDirectory d(dir + "/runs/kv/prefix", test_kind({"manifest.json"}), false);
    auto f = d.create("manifest.json");
    f->sink().write("{}");
    f->commit();
    d.commit();
  }
  EXPECT_EQ(read_file(dir + "/runs/kv/prefix/manifest.json"), "{}");
  write_file_atomic(dir + "/a/b/c.bin", "c", false);
  EXPECT_EQ(read_file(dir + "/a/b/c.bin"), "c");
  EXPECT_EQ(list_dir(dir + "/runs/kv"), std::vector<std::string>{"prefix"});
  write_file_atomic(dir + "/plain", "p", false);
  EXPECT_EQ(error_of([&] { write_file_atomic(dir + "/plain/x/y.bin", "y", false); }),
            dir + "/plain/x/y.bin: parent '" + dir + "/plain' is not a directory (it is a regular file)");
}

// Defect 11: errors named the hidden temporary instead of the user's --output.
TEST(AtomicPaths, ErrorsNameTheOutputNotTheTemporary) {
  const std::string dir = test::temp_dir("names");
  const std::string path = dir + "/out.bin", snap = dir + "/snap";
  {
    AtomicFile f(path, false);
    f.sink().write("late");
    write_file_atomic(path, "first", false);
    EXPECT_EQ(error_of([&] { f.commit(); }),
              path + ": already exists; refusing to overwrite it (pass --force to replace it)");
  }
  EXPECT_EQ(read_file(path), "first");
  // A write that fails (file size limit) names the output, or the file inside the output.
  int msgs[2];
  ASSERT_EQ(::pipe(msgs), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit lim{1024, 1024};
    ::setrlimit(RLIMIT_FSIZE, &lim);
    std::string out = error_of([&] {
      AtomicFile f(dir + "/big.bin", false);
      f.sink().write(std::string(4096, 'x'));
    });
    out += "\n" + error_of([&] {
      AtomicDirectory d(snap, test_kind({"keys.f16le"}), false);
      auto f = d.create("keys.f16le");
      f->sink().write(std::string(4096, 'x'));
    });
    (void)!::write(msgs[1], out.data(), out.size());
    ::_exit(0);
  }
  ::close(msgs[1]);
  std::string got;
  char buf[512];
  for (ssize_t r; (r = ::read(msgs[0], buf, sizeof buf)) > 0;) got.append(buf, size_t(r));
  ::waitpid(child, nullptr, 0);
  const auto nl = got.find('\n');
  ASSERT_NE(nl, std::string::npos) << got;
  const std::string limit =
      ": write failed: the file size limit was reached (ulimit -f, RLIMIT_FSIZE; 1024 bytes written); nothing was "
      "published";
  EXPECT_EQ(got.substr(0, nl), dir + "/big.bin" + limit);
  EXPECT_EQ(got.substr(nl + 1), snap + "/keys.f16le" + limit);
  EXPECT_EQ(got.find(".tmp-"), std::string::npos) << got;
}

TEST(AtomicPaths, OutputThatIsAnInputIsRefused) {
  const std::string dir = test::temp_dir("same");
  const std::string in = dir + "/model.gguf";
  write_file_atomic(in, "weights", false);
  ASSERT_EQ(::link(in.c_str(), (dir + "/hard.gguf").c_str()), 0);
  ASSERT_EQ(::symlink(in.c_str(), (dir + "/soft.gguf").c_str()), 0);
  const std::string itself = ": is the input '" + in +
                             "' itself; refusing to write an output over an input (even with --force)";
  for (const std::string& out : {in, dir + "/./model.gguf", dir + "/hard.gguf", dir + "/soft.gguf"}) {
    EXPECT_EQ(error_of([&] { refuse_output_is_input(out, {"", dir + "/other", in}); }), out + itself);
  }
  // A path that does not exist yet, spelled two ways.
  EXPECT_NE(error_of([&] { refuse_output_is_input(dir + "/new", {dir + "/sub/../new"}); }), "");
  // A directory holding an input would delete it when replaced.
  EXPECT_EQ(error_of([&] { refuse_output_is_input(dir + "/", {in}); }),
            dir + "/: contains the input '" + in +
                "'; refusing to replace a directory that holds an input (even with --force)");
  // Writing into an input directory changes the input.
  EXPECT_EQ(error_of([&] { refuse_output_is_input(dir + "/snap.kvc", {dir}); }),
            dir + "/snap.kvc: is inside the input directory '" + dir + "'; refusing to write into an input");
  EXPECT_EQ(error_of([&] { refuse_output_is_input(dir + "/out.gguf", {in, dir + "/modelx"}); }), "");
  EXPECT_EQ(error_of([&] { refuse_output_is_input("", {in}); }), "");
  EXPECT_EQ(read_file(in), "weights");
}

}  // namespace
}  // namespace ember
