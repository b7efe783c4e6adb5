#pragma once
// Atomic writes: nothing half-written is ever visible under the final name, and nothing
// existing is replaced unless the caller passes force.
//
// How: data goes to a temporary sibling ".<name>.tmp-<pid>-<n>" (missing parent directories
// of the output are created first, mode 0755), is fsync'ed, then published and the parent
// directory fsync'ed.
//  - Without force, publishing is renameat2(RENAME_NOREPLACE): if anything appeared at the
//    path meanwhile (another writer won a race), the commit fails with "already exists" and
//    the existing artifact is left untouched. Two concurrent writers of one path give exactly
//    one complete artifact and one error.
//  - With force, an existing artifact is swapped with the new one in one step
//    (renameat2(RENAME_EXCHANGE)); the old one, now under the temporary name, is removed
//    after. A kill -9 at any moment leaves the old or the new artifact at the path, never
//    nothing; at worst the old one survives under a temporary name until the next write.
//  - Fallback, where the file system lacks renameat2 flags (EINVAL/ENOSYS): a file is
//    published with link()+unlink() (link refuses an existing path) or, forced, rename()
//    (which replaces a file atomically); a directory with rename(), which refuses a
//    non-empty target but would replace an empty directory created in the race window, and,
//    forced, by moving the old directory aside and then renaming: a kill between those two
//    renames leaves nothing at the path (the old one stays under a temporary name).
//
// Temporaries of killed writers: each temporary is flock(LOCK_EX)'ed by its writer for its
// whole life (a directory through an O_DIRECTORY descriptor). Every AtomicFile and
// AtomicDirectory constructor sweeps the temporaries of its own path, removing one only when
// (a) its lock can be taken without waiting and (b) the pid in its name is not alive
// (kill(pid, 0) fails with ESRCH). Both, so that neither pid reuse nor the moment between a
// writer creating its temporary and locking it can make a live writer's temporary look dead.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "util/byte_io.h"

namespace ember {

// A single file. Write through sink(), then commit(). Destroying without commit() removes
// the temporary. Errors name final_path (the user's path), never the temporary.
class AtomicFile {
 public:
  AtomicFile(std::string final_path, bool force);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ByteSink& sink();
  const std::string& temp_path() const { return temp_path_; }
  void commit();

 private:
  friend class AtomicDirectory;
  class FdSink;
  // A file inside an AtomicDirectory's temporary: named `shown_path` in errors, no sweep and
  // no parent creation (the temporary directory is private to its writer).
  AtomicFile(std::string final_path, std::string shown_path);
  void open_temporary();
  std::string final_path_, shown_path_, temp_path_;
  bool force_ = false;
  std::unique_ptr<FdSink> sink_;
  bool committed_ = false;
};

// The kind of directory an AtomicDirectory writes, by the entries it holds: what a forced
// replacement may take away. `--force` must replace an artifact ember wrote and never anything
// else (a user's directory given as the output by mistake, the working directory, "/"), so a
// directory is replaceable only when it is empty or when every entry is a regular file (no
// symlink, no subdirectory, no FIFO) named as the kind names its entries and the names form
// one whole artifact: all of `entries`, or, for a numbered kind, `numbered_prefix` N
// `numbered_suffix` for every N in 0..count-1 (count >= 1).
struct DirectoryKind {
  std::string label;                 // for messages: "an ember state directory (...)"
  std::vector<std::string> entries;  // fixed names, all required
  std::string numbered_prefix, numbered_suffix;  // a numbered kind (entries empty)
  static DirectoryKind fixed(std::string label, std::vector<std::string> entries) {
    return {std::move(label), std::move(entries), "", ""};
  }
  static DirectoryKind numbered(std::string label, std::string prefix, std::string suffix) {
    return {std::move(label), {}, std::move(prefix), std::move(suffix)};
  }
  // "manifest.json, keys.f16le, values.f16le" or "model.layers.<N>.x.safetensors for N = 0.."
  std::string describe_entries() const;
};

// Refuses (Error naming `path` and, by name, what it holds that the kind does not) a forced
// replacement of `path` by a directory of `kind`: a path that is not a directory of that kind
// (above), or that is "/", the current working directory or one of its ancestors. Nothing is
// touched. A missing path passes. AtomicDirectory calls it before it writes and again just
// before it swaps.
void refuse_unless_replaceable(const std::string& path, const DirectoryKind& kind);

// A directory of files (a snapshot). Files are created inside the temporary directory with
// fixed names chosen by ember (never taken from input); commit() fsyncs them and publishes the
// directory as described above. With force, an existing directory is replaced only when
// refuse_unless_replaceable(final_path, kind) passes, and the old one is then removed entry by
// entry (the kind's names only) and rmdir'ed, never recursively.
class AtomicDirectory {
 public:
  AtomicDirectory(std::string final_path, DirectoryKind kind, bool force);
  ~AtomicDirectory();
  AtomicDirectory(const AtomicDirectory&) = delete;
  AtomicDirectory& operator=(const AtomicDirectory&) = delete;
  const std::string& temp_path() const { return temp_path_; }
  // Opens a new file `name` (a plain file name, no '/') in the temporary directory.
  std::unique_ptr<AtomicFile> create(const std::string& name);
  void commit();

 private:
  std::string final_path_, temp_path_;
  DirectoryKind kind_;
  bool force_;
  int lock_fd_ = -1;  // O_DIRECTORY descriptor of the temporary, flock'ed while it exists
  bool committed_ = false;
};

// Writes a whole small file atomically.
void write_file_atomic(const std::string& path, std::string_view contents, bool force);
// Reads a whole file; Error naming the path if missing or larger than max_bytes.
std::string read_file(const std::string& path, size_t max_bytes = size_t(1) << 30);
// read_file, or standard input when path is "-" (llama.cpp's and most tools' habit, for a
// prompt, prompt file, messages or JSON document): read to its end, Error past max_bytes.
// Only inputs a user names on the command line use it; a key or a state is never read from
// a pipe whose origin nobody can check.
std::string read_input(const std::string& path, size_t max_bytes);
bool path_exists(const std::string& path);
// Removes the temporaries ".<name>.tmp-<pid>-<n>" of a target path whose writers are dead
// (lock free and pid gone, see above). A live writer's temporary is never touched.
void remove_stale_temporaries(const std::string& final_path);

// Refuses (Error naming `output`) an output that is one of the inputs: the same file
// (st_dev/st_ino, so hard and symbolic links count), the same canonical path for a path
// that does not exist yet, a directory that contains an input (replacing it would delete
// the input), or a path inside an input directory (writing there would change the input).
// Holds with --force too. Empty strings (unset options) are ignored.
void refuse_output_is_input(const std::string& output, const std::vector<std::string>& inputs);

// How commits published, counted since the process started (tests and diagnostics).
struct AtomicPublishCounts {
  uint64_t no_replace = 0;  // renameat2(RENAME_NOREPLACE)
  uint64_t exchange = 0;    // renameat2(RENAME_EXCHANGE), forced replacement
  uint64_t fallback = 0;    // link()/rename() where renameat2 flags are not supported
};
AtomicPublishCounts atomic_publish_counts();
// Tests only: behave as if the file system lacked renameat2 flags (exercise the fallback).
void atomic_set_renameat2_disabled_for_testing(bool disabled);

}  // namespace ember
