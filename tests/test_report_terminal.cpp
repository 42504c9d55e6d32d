// TerminalSafe: recorded names cannot drive the terminal that shows a report.
#include <catch2/catch.hpp>

#include "report/terminal.h"

using stallprof::report::TerminalSafe;

TEST_CASE("Printable names, UTF-8 included, are shown unchanged", "[terminal]") {
  CHECK(TerminalSafe("decode") == "decode");
  CHECK(TerminalSafe("train_loader (ImageFolder)") == "train_loader (ImageFolder)");
  CHECK(TerminalSafe("d\xc3\xa9" "codage \xe2\x86\x92 \xf0\x9f\x93\xa6") == "d\xc3\xa9" "codage \xe2\x86\x92 \xf0\x9f\x93\xa6");
  CHECK(TerminalSafe("back\\slash") == "back\\slash");
}

TEST_CASE("Escape sequences in a name are shown, not sent to the terminal", "[terminal]") {
  // Retitle the window, clear the screen, ring the bell.
  const std::string hostile = "\x1b]0;pwned\x07\x1b[2J\x1b[Hstage";
  const std::string safe = TerminalSafe(hostile);
  CHECK(safe == "\\e]0;pwned\\x07\\e[2J\\e[Hstage");
  for (char c : safe) CHECK(static_cast<unsigned char>(c) >= 0x20);
}

TEST_CASE("Line breaks, tabs, DEL and other C0 controls are escaped", "[terminal]") {
  CHECK(TerminalSafe("a\nb\rc\td") == "a\\nb\\rc\\td");
  CHECK(TerminalSafe(std::string("x\0y", 3)) == "x\\x00y");
  CHECK(TerminalSafe("\x7f") == "\\x7f");
}

TEST_CASE("C1 controls, invalid UTF-8 and bidirectional overrides are escaped", "[terminal]") {
  CHECK(TerminalSafe("\xc2\x9b" "31m") == "\\u{009b}31m");     // 8-bit CSI as UTF-8
  CHECK(TerminalSafe("\x9b" "31m") == "\\x9b31m");              // a raw C1 byte is not UTF-8
  CHECK(TerminalSafe("\xe2\x80\xae" "cod.exe") == "\\u{202e}cod.exe");  // right-to-left override
  CHECK(TerminalSafe("\xff\xfe") == "\\xff\\xfe");
  CHECK(TerminalSafe("\xe2\x86") == "\\xe2\\x86");              // truncated sequence
}
