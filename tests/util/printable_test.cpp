// util/printable.h and the error helpers that use it (defect 8, issue 12).
#include <gtest/gtest.h>

#include <string>

#include "util/error.h"
#include "util/printable.h"

namespace ember {
namespace {

using namespace std::string_literals;

TEST(Printable, ControlsAndInvalidUtf8AreEscapedValidUtf8Kept) {
  EXPECT_EQ(printable("plain text, d\xc3\xa9j\xc3\xa0 vu \xe2\x9c\x93"), "plain text, d\xc3\xa9j\xc3\xa0 vu \xe2\x9c\x93");
  EXPECT_EQ(printable("\x1b[2J"), "\\x1b[2J");
  EXPECT_EQ(printable("a\0b"s), "a\\x00b");
  EXPECT_EQ(printable("one\ntwo\r\tend\x7f"), "one\\x0atwo\\x0d\\x09end\\x7f");
  EXPECT_EQ(printable("\xc2\x9b" "31m"), "\\u009b31m");                    // 8-bit CSI (C1)
  EXPECT_EQ(printable("\xe2\x80\xae" "abc"), "\\u202eabc");               // right-to-left override
  EXPECT_EQ(printable("\xff\xc3"), "\\xff\\xc3");                          // invalid, truncated
  EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf");                          // overlong '/'
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");                 // a surrogate
  EXPECT_EQ(printable("\xf0\x9f\x98\x80"), "\xf0\x9f\x98\x80");            // U+1F600 kept
  const std::string nasty = "\x1b]0;title\x07\xc2\x9b\xff\n"s + '\0';
  EXPECT_EQ(printable(printable(nasty)), printable(nasty));  // idempotent
}

// Defect 8: strings from files reached messages raw. Checked failing before: the message held
// the ESC, the NUL (which cut it when printed with %s) and the newline.
TEST(Printable, ErrorMessagesAreOneEscapedLine) {
  try {
    fail_field("m\x1b[2J.json", "key\nname"s, "no such key", "x\0y\x1b[31m"s);
    FAIL();
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m, "m\\x1b[2J.json: key\\x0aname: expected no such key, found x\\x00y\\x1b[31m");
  }
  try {
    fail("f.gguf", "tensor \"\x1b[H\"\n");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "f.gguf: tensor \"\\x1b[H\"\\x0a");
  }
}

}  // namespace
}  // namespace ember
