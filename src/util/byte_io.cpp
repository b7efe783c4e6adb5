#include "util/byte_io.h"

#include <algorithm>

#include "util/error.h"

namespace ember {

void ByteSink::write_zeros(size_t n) {
  static const uint8_t zeros[256] = {};
  while (n) {
    const size_t k = n < sizeof zeros ? n : sizeof zeros;
    write(zeros, k);
    n -= k;
  }
}

void ByteSink::pad_to(uint64_t alignment) {
  if (alignment <= 1) return;
  const uint64_t rem = n_bytes_ % alignment;
  if (rem) write_zeros(size_t(alignment - rem));
}

void SpanSource::read(void* dst, size_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  while (n > 0) {
    if (span_ >= spans_.size()) fail(where_, "read past the end of the payload");
    const auto& [p, size] = spans_[span_];
    const size_t take = std::min(n, size - at_);
    std::memcpy(out, p + at_, take);
    out += take;
    n -= take;
    at_ += take;
    if (at_ == size) ++span_, at_ = 0;
  }
}

void BufferSink::write(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  out_.insert(out_.end(), p, p + n);
  n_bytes_ += n;
}

void HashingSink::write(const void* data, size_t n) {
  hasher_.update(data, n);
  if (inner_) inner_->write(data, n);
  n_bytes_ += n;
}

void ByteReader::seek(size_t pos, std::string_view field) {
  if (pos > size_)
    fail_field(where_, field, "offset <= " + std::to_string(size_), std::to_string(pos));
  pos_ = pos;
}

const uint8_t* ByteReader::take(size_t n, std::string_view field) {
  if (n > size_ - pos_)
    fail_field(where_, field,
               std::to_string(n) + " more bytes at offset " + std::to_string(pos_),
               "end of data after " + std::to_string(size_ - pos_) + " bytes (truncated)");
  const uint8_t* p = data_ + pos_;
  pos_ += n;
  return p;
}

}  // namespace ember
