#pragma once
// Opening an input file, shared by read_file() (util/atomic_file.h) and MappedFile::open(), so
// both accept and refuse the same paths with the same messages.
#include <cstdint>
#include <string>

namespace ember {

// Opens `path` read-only (close-on-exec) and checks that it is a regular file. Returns the
// descriptor, which the caller closes, and its size in *size. Throws Error naming the path
// ("cannot open: <reason>" or "not a regular file (a FIFO)") otherwise, with nothing left open.
// Never blocks: a FIFO, socket or device is refused without waiting for a writer. With
// follow_symlinks false, a symbolic link at `path` itself is refused too.
int open_regular_file(const std::string& path, uint64_t* size, bool follow_symlinks = true);

// Reads exactly `size` bytes from fd (as open_regular_file reported them), then closes it;
// Error naming `where` if the file shrinks or a read fails (fd closed either way).
std::string read_all_and_close(int fd, uint64_t size, const std::string& where);

// "a directory", "a FIFO", ... for an st_mode; for error messages.
const char* describe_file_type(unsigned mode);

}  // namespace ember
