#pragma once
// Atomic writes: nothing half-written is ever visible under the final name, and nothing
// existing is overwritten unless the caller passes force. Data goes to a temporary sibling
// (".<name>.tmp-<pid>-<n>"), is fsync'ed, then renamed into place and the parent directory
// fsync'ed. A kill -9 at any moment leaves either the old state or the complete new one
// (plus, at worst, a hidden temporary that the next write of the same name removes).
#include <memory>
#include <string>

#include "util/byte_io.h"

namespace ember {

// A single file. Write through sink(), then commit(). Destroying without commit() removes
// the temporary.
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
  class FdSink;
  std::string final_path_, temp_path_;
  bool force_;
  std::unique_ptr<FdSink> sink_;
  bool committed_ = false;
};

// A directory of files (a snapshot). Files are created inside the temporary directory with
// fixed names chosen by ember (never taken from input); commit() fsyncs them and renames the
// directory into place. With force, an existing directory is replaced (moved aside, then
// removed after the rename succeeded).
class AtomicDirectory {
 public:
  AtomicDirectory(std::string final_path, bool force);
  ~AtomicDirectory();
  AtomicDirectory(const AtomicDirectory&) = delete;
  AtomicDirectory& operator=(const AtomicDirectory&) = delete;
  const std::string& temp_path() const { return temp_path_; }
  // Opens a new file `name` (a plain file name, no '/') in the temporary directory.
  std::unique_ptr<AtomicFile> create(const std::string& name);
  void commit();

 private:
  std::string final_path_, temp_path_;
  bool force_;
  bool committed_ = false;
};

// Writes a whole small file atomically.
void write_file_atomic(const std::string& path, std::string_view contents, bool force);
// Reads a whole file; Error naming the path if missing or larger than max_bytes.
std::string read_file(const std::string& path, size_t max_bytes = size_t(1) << 30);
bool path_exists(const std::string& path);
// Removes leftover temporaries ".<name>.tmp-*" of a target path (from a killed writer).
void remove_stale_temporaries(const std::string& final_path);

}  // namespace ember
