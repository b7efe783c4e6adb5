#pragma once
// One small writer interface for every format ember writes (GGUF, snapshots, KVC1,
// receipts): files, memory buffers, hashers and size counters share one code path, so a
// hash is always computed over exactly the bytes written.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/sha256.h"

namespace ember {

class ByteSink {
 public:
  virtual ~ByteSink() = default;
  // Appends n bytes. Throws Error on failure.
  virtual void write(const void* data, size_t n) = 0;
  uint64_t n_bytes() const { return n_bytes_; }

  void write(std::string_view s) { write(s.data(), s.size()); }
  template <typename T>
  void write_le(T v) {  // little-endian scalar (ember only targets little-endian hosts)
    static_assert(std::is_trivially_copyable_v<T>);
    write(&v, sizeof v);
  }
  void write_zeros(size_t n);
  // Pads with zeros up to the next multiple of alignment (relative to n_bytes()).
  void pad_to(uint64_t alignment);

 protected:
  uint64_t n_bytes_ = 0;
};

// Counts bytes only: sizes a layout before writing it.
class CountingSink final : public ByteSink {
 public:
  void write(const void*, size_t n) override { n_bytes_ += n; }
  using ByteSink::write;
};

// Appends to a vector owned by the caller.
class BufferSink final : public ByteSink {
 public:
  explicit BufferSink(std::vector<uint8_t>& out) : out_(out) {}
  void write(const void* data, size_t n) override;
  using ByteSink::write;

 private:
  std::vector<uint8_t>& out_;
};

// Hashes what passes through, and forwards it to an optional inner sink.
class HashingSink final : public ByteSink {
 public:
  explicit HashingSink(ByteSink* inner = nullptr) : inner_(inner) {}
  void write(const void* data, size_t n) override;
  using ByteSink::write;
  Digest finish() { return hasher_.finish(); }

 private:
  ByteSink* inner_;
  Sha256 hasher_;
};

// The reading twin of ByteSink: every payload reader (a snapshot directory's files, a KVC1
// file's tensors, a store's chunks) hands its bytes to one consumer through this, so a
// payload is checked by one code path whatever it came from (kv/state.h: read_payloads).
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Fills exactly n bytes of dst, or throws Error naming the source (truncated, I/O error,
  // a chunk missing or of the wrong size). Never returns fewer bytes.
  virtual void read(void* dst, size_t n) = 0;
};

// A source over bytes in memory (a mapped file's tensors, in order).
class SpanSource final : public ByteSource {
 public:
  SpanSource(std::vector<std::pair<const uint8_t*, size_t>> spans, std::string where)
      : spans_(std::move(spans)), where_(std::move(where)) {}
  void read(void* dst, size_t n) override;

 private:
  std::vector<std::pair<const uint8_t*, size_t>> spans_;
  size_t span_ = 0, at_ = 0;
  std::string where_;
};

// Bounds-checked little-endian reader over a byte range. Every read that would run past the
// end throws Error naming `where` and the field being read, never reads out of bounds.
class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size, std::string where)
      : data_(data), size_(size), where_(std::move(where)) {}
  size_t offset() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }
  const std::string& where() const { return where_; }
  void seek(size_t pos, std::string_view field);
  const uint8_t* take(size_t n, std::string_view field);  // pointer to n bytes, advances
  template <typename T>
  T read_le(std::string_view field) {
    static_assert(std::is_trivially_copyable_v<T>);
    T v;
    std::memcpy(&v, take(sizeof(T), field), sizeof(T));
    return v;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  std::string where_;
};

}  // namespace ember
