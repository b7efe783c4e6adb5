#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "support/test_support.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/f16.h"
#include "util/mapped_file.h"
#include "util/open_file.h"
#include "util/sha256.h"
#include "util/thread_pool.h"

namespace ember {
namespace {

TEST(F16, RoundTripsEveryHalfExactly) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = f16_to_f32(uint16_t(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f))));
      continue;
    }
    EXPECT_EQ(f32_to_f16(f), h) << "half bits " << h;
  }
}

TEST(F16, RoundsToNearestEven) {
  EXPECT_EQ(f32_to_f16(1.0f + 1.0f / 2048), 0x3c00);          // tie -> even (down)
  EXPECT_EQ(f32_to_f16(1.0f + 3.0f / 2048), 0x3c02);          // tie -> even (up)
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);                    // rounds to infinity
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);       // tie to even zero
  EXPECT_EQ(f32_to_f16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
}

TEST(BF16, RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x3f808000)), 0x3f80);  // tie, even stays
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x3f818000)), 0x3f82);  // tie, odd rounds up
}

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(AtomicFile, RefusesOverwriteWithoutForce) {
  const std::string dir = test::temp_dir("atomic");
  const std::string path = dir + "/out.txt";
  write_file_atomic(path, "first", false);
  EXPECT_THROW(write_file_atomic(path, "second", false), Error);
  EXPECT_EQ(read_file(path), "first");
  write_file_atomic(path, "second", true);
  EXPECT_EQ(read_file(path), "second");
}

TEST(AtomicFile, UncommittedLeavesNothing) {
  const std::string dir = test::temp_dir("atomic");
  {
    AtomicFile f(dir + "/x", false);
    f.sink().write("partial");
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir));
}

TEST(AtomicDirectory, CommitsWholeOrNothing) {
  const std::string dir = test::temp_dir("atomicdir");
  {
    AtomicDirectory d(dir + "/snap", false);
    auto f = d.create("a.bin");
    f->sink().write("x");
    f->commit();
  }
  EXPECT_FALSE(path_exists(dir + "/snap"));
  AtomicDirectory d(dir + "/snap", false);
  auto f = d.create("a.bin");
  f->sink().write("x");
  f->commit();
  EXPECT_THROW(d.create("../escape"), Error);
  d.commit();
  EXPECT_EQ(read_file(dir + "/snap/a.bin"), "x");
  EXPECT_THROW(AtomicDirectory(dir + "/snap", false), Error);
}

// The message of the Error that fn() throws ("" when it throws none).
template <class F>
std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// read_file() and MappedFile::open() open through open_regular_file(): the same refusals.
TEST(OpenRegularFile, ReadFileAndMappedFileRefuseTheSamePaths) {
  const std::string dir = test::temp_dir("open");
  write_file_atomic(dir + "/five", "12345", false);
  uint64_t size = 0;
  const int fd = open_regular_file(dir + "/five", &size);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(::close(fd), 0);
  EXPECT_EQ(size, 5u);
  EXPECT_EQ(read_file(dir + "/five"), "12345");
  EXPECT_EQ(MappedFile::open(dir + "/five")->size(), 5u);
  for (const std::string& path : {dir + "/missing", dir}) {
    SCOPED_TRACE(path);
    const std::string msg = error_of([&] { open_regular_file(path, &size); });
    EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << msg;
    EXPECT_NE(msg.find(path == dir ? "not a regular file" : "cannot open: "), std::string::npos) << msg;
    EXPECT_EQ(error_of([&] { read_file(path); }), msg);
    EXPECT_EQ(error_of([&] { MappedFile::open(path); }), msg);
  }
  // read_file's own limit comes after the shared checks.
  EXPECT_NE(error_of([&] { read_file(dir + "/five", 4); }).find("at most 4 bytes"), std::string::npos);
}

TEST(ThreadPool, CoversRangeOnce) {
  ThreadPool pool(3);
  std::vector<int> hits(1000, 0);
  pool.parallel_for(1000, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[size_t(i)]++;
  });
  for (int h : hits) EXPECT_EQ(h, 1);
}

}  // namespace
}  // namespace ember
