// Issue 35, item 1: `--force` deleted any existing directory, recursively (a user's directory
// given as the output by mistake, the working directory). A forced AtomicDirectory now replaces
// only a directory of its own kind (DirectoryKind, util/atomic_file.h) or an empty one, and
// never "/", the working directory or an ancestor of it; anything else is refused by name and
// left as it was. The CLI writers are tested in tests/cli/force_test.cpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "support/test_support.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace ember {
namespace {

namespace fs = std::filesystem;
using test::error_of;

const DirectoryKind kSnap =
    DirectoryKind::fixed("an ember state directory", {"manifest.json", "keys.f16le", "values.f16le"});
const DirectoryKind kLayers = DirectoryKind::numbered("a vLLM cache directory", "layer.", ".st");

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Writes `names` (each holding `text`) as one AtomicDirectory of `kind` at `path`.
void write_dir(const std::string& path, const DirectoryKind& kind, const std::vector<std::string>& names,
               const std::string& text, bool force) {
  AtomicDirectory d(path, kind, force);
  for (const std::string& n : names) {
    auto f = d.create(n);
    f->sink().write(text);
    f->commit();
  }
  d.commit();
}

const std::vector<std::string> kSnapFiles = {"keys.f16le", "manifest.json", "values.f16le"};
const std::string kExpected =
    ": --force: expected an ember state directory (manifest.json, keys.f16le, values.f16le) or an empty "
    "directory, found ";

TEST(ForceReplace, ADirectoryOfTheKindOrAnEmptyOneIsReplaced) {
  const std::string dir = test::temp_dir("force-kind");
  for (bool fallback : {false, true}) {
    SCOPED_TRACE(fallback ? "fallback" : "renameat2");
    atomic_set_renameat2_disabled_for_testing(fallback);
    const std::string snap = dir + (fallback ? "/b" : "/a");
    write_dir(snap, kSnap, kSnapFiles, "old", false);
    write_dir(snap, kSnap, kSnapFiles, "new", true);
    EXPECT_EQ(names_in(snap), kSnapFiles);
    EXPECT_EQ(read_file(snap + "/keys.f16le"), "new");
    fs::create_directory(snap + "-empty");
    write_dir(snap + "-empty", kSnap, kSnapFiles, "new", true);
    EXPECT_EQ(names_in(snap + "-empty"), kSnapFiles);
    // A numbered kind: any whole count replaces any other.
    write_dir(snap + "-layers", kLayers, {"layer.0.st", "layer.1.st", "layer.2.st"}, "old", false);
    write_dir(snap + "-layers", kLayers, {"layer.0.st", "layer.1.st"}, "new", true);
    EXPECT_EQ(names_in(snap + "-layers"), (std::vector<std::string>{"layer.0.st", "layer.1.st"}));
  }
  atomic_set_renameat2_disabled_for_testing(false);
  // Nothing of the old ones is left beside them.
  EXPECT_EQ(names_in(dir), (std::vector<std::string>{"a", "a-empty", "a-layers", "b", "b-empty", "b-layers"}));
}

TEST(ForceReplace, AnythingElseIsRefusedByNameAndLeftAsItWas) {
  const std::string dir = test::temp_dir("force-foreign");
  const std::string vd = dir + "/vd";
  fs::create_directories(vd + "/sub");
  write_file_atomic(vd + "/a.txt", "a", false);
  EXPECT_EQ(error_of([&] { write_dir(vd, kSnap, kSnapFiles, "new", true); }),
            vd + kExpected + "'a.txt', 'sub' (a directory) (left as it was)");
  EXPECT_EQ(names_in(vd), (std::vector<std::string>{"a.txt", "sub"}));
  EXPECT_EQ(read_file(vd + "/a.txt"), "a");
  EXPECT_EQ(names_in(dir), std::vector<std::string>{"vd"});  // no temporary left beside it

  // The kind's names in the wrong shape: a missing entry, an entry that is a directory or a
  // symlink, one stray file beside a whole snapshot, a gap in the numbered files.
  const std::string s = dir + "/s";
  write_dir(s, kSnap, {"keys.f16le", "manifest.json"}, "x", false);
  EXPECT_EQ(error_of([&] { write_dir(s, kSnap, kSnapFiles, "new", true); }), s + kExpected +
                                                                                 "no 'values.f16le' (left as it was)");
  fs::create_directory(s + "/values.f16le");
  EXPECT_EQ(error_of([&] { write_dir(s, kSnap, kSnapFiles, "new", true); }),
            s + kExpected + "'values.f16le' (a directory) (left as it was)");
  fs::remove(s + "/values.f16le");
  fs::create_symlink("/etc/passwd", s + "/values.f16le");
  EXPECT_EQ(error_of([&] { write_dir(s, kSnap, kSnapFiles, "new", true); }),
            s + kExpected + "'values.f16le' (a symbolic link) (left as it was)");
  fs::remove(s + "/values.f16le");
  write_file_atomic(s + "/values.f16le", "x", false);
  write_file_atomic(s + "/notes.md", "mine", false);
  EXPECT_EQ(error_of([&] { write_dir(s, kSnap, kSnapFiles, "new", true); }),
            s + kExpected + "'notes.md' (left as it was)");
  EXPECT_EQ(read_file(s + "/keys.f16le"), "x");
  const std::string l = dir + "/l";
  write_dir(l, kLayers, {"layer.0.st", "layer.2.st"}, "x", false);
  EXPECT_NE(error_of([&] { write_dir(l, kLayers, {"layer.0.st"}, "new", true); })
                .find("found 2 numbered files, not N = 0..1 (left as it was)"),
            std::string::npos);
  EXPECT_EQ(names_in(l), (std::vector<std::string>{"layer.0.st", "layer.2.st"}));
}

// The check runs again just before the swap: a file that appears while the new artifact is
// written is not deleted with the old one (renameat2 exchange and the two-rename fallback).
TEST(ForceReplace, AFileThatAppearsBeforeTheSwapIsNotDeleted) {
  const std::string dir = test::temp_dir("force-late");
  for (bool fallback : {false, true}) {
    SCOPED_TRACE(fallback ? "fallback" : "renameat2");
    const std::string snap = dir + (fallback ? "/b" : "/a");
    write_dir(snap, kSnap, kSnapFiles, "old", false);
    atomic_set_renameat2_disabled_for_testing(fallback);
    const std::string e = error_of([&] {
      AtomicDirectory d(snap, kSnap, true);
      auto f = d.create("manifest.json");
      f->sink().write("new");
      f->commit();
      write_file_atomic(snap + "/late.txt", "mine", false);
      d.commit();
    });
    atomic_set_renameat2_disabled_for_testing(false);
    EXPECT_EQ(e, snap + kExpected + "'late.txt' (left as it was)");
    EXPECT_EQ(read_file(snap + "/late.txt"), "mine");
    EXPECT_EQ(read_file(snap + "/manifest.json"), "old");
  }
  EXPECT_EQ(names_in(dir), (std::vector<std::string>{"a", "b"}));
}

// Even an empty directory, or one of the kind, is never replaced when the process stands in
// it or below it; "/" never.
TEST(ForceReplace, TheWorkingDirectoryItsAncestorsAndRootAreNeverReplaced) {
  const std::string dir = test::temp_dir("force-cwd");
  const std::string snap = dir + "/snap";
  write_dir(snap, kSnap, kSnapFiles, "old", false);
  fs::create_directory(snap + "-empty");
  const fs::path before = fs::current_path();
  fs::current_path(snap);
  const std::string here = error_of([&] { write_dir(snap, kSnap, kSnapFiles, "new", true); });
  const std::string dot = error_of([&] { write_dir(".", kSnap, kSnapFiles, "new", true); });
  fs::current_path(snap + "-empty");
  const std::string up = error_of([&] { write_dir(snap + "-empty", kSnap, kSnapFiles, "new", true); });
  fs::current_path(before);
  EXPECT_EQ(here, snap + ": --force: expected an ember state directory (manifest.json, keys.f16le, values.f16le) or "
                         "an empty directory, never the working directory or one of its ancestors, found the current "
                         "working directory (left as it was)");
  EXPECT_NE(dot.find(": output path: expected a file or directory name, found '.'"), std::string::npos) << dot;
  EXPECT_NE(up.find("found the current working directory (left as it was)"), std::string::npos) << up;
  EXPECT_EQ(read_file(snap + "/keys.f16le"), "old");
  // An ancestor: the test's own temporary tree holds the working directory of a child.
  fs::current_path(snap);
  const std::string parent = error_of([&] { write_dir(dir, kSnap, kSnapFiles, "new", true); });
  fs::current_path(before);
  EXPECT_NE(parent.find("found an ancestor of the current working directory '" + fs::canonical(snap).string() + "'"),
            std::string::npos)
      << parent;
  EXPECT_NE(error_of([&] { write_dir("/", kSnap, kSnapFiles, "new", true); }), "");
  EXPECT_EQ(names_in(dir), (std::vector<std::string>{"snap", "snap-empty"}));
}

}  // namespace
}  // namespace ember
