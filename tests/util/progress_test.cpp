#include "util/progress.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

namespace ember {
namespace {

TEST(Progress, EtaFormats) {
  EXPECT_EQ(format_eta(0), "0s");
  EXPECT_EQ(format_eta(45.4), "45s");
  EXPECT_EQ(format_eta(118), "1m58s");
  EXPECT_EQ(format_eta(7380), "2h03m");
  EXPECT_EQ(format_eta(-1), "?");
}

TEST(Progress, LineShowsCountTotalUnitAndNoControlCharacters) {
  ::setenv("EMBER_PROGRESS", "0", 1);
  Progress p("collect \x1b[31m", 320, "prompts");
  EXPECT_FALSE(p.shown());
  p.update(37);
  p.update(12);  // never goes back
  const std::string line = p.line();
  EXPECT_NE(line.find("37/320 prompts"), std::string::npos) << line;
  EXPECT_NE(line.find("ETA"), std::string::npos) << line;
  for (char c : line) EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20) << line;
  ::unsetenv("EMBER_PROGRESS");
}

TEST(Progress, DisabledOffTerminalUnlessForced) {
  ::unsetenv("EMBER_PROGRESS");
  // ctest runs with standard error on a pipe or file, not a terminal.
  if (!isatty(2)) {
    EXPECT_FALSE(Progress("x", 1).shown());
  }
  ::setenv("EMBER_PROGRESS", "1", 1);
  EXPECT_TRUE(Progress("x", 1).shown());
  ::unsetenv("EMBER_PROGRESS");
}

}  // namespace
}  // namespace ember
