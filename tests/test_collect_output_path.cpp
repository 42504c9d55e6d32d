// -o placeholders and the output directory check (before the command starts).
#include <catch2/catch.hpp>
#include <unistd.h>

#include <cstdlib>

#include "collect/collect.h"

using namespace stallprof;
using namespace stallprof::collect;

TEST_CASE("output placeholders expand to rank, hostname and pid") {
  setenv("RANK", "7", 1);
  CHECK(ExpandOutputPath("rank%r.pb").value() == "rank7.pb");
  unsetenv("RANK");
  CHECK(ExpandOutputPath("rank%r.pb").value() == "rank0.pb");
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  CHECK(ExpandOutputPath("%h/t.pb").value() == std::string(host) + "/t.pb");
  CHECK(ExpandOutputPath("t-%p.pb").value() == "t-" + std::to_string(getpid()) + ".pb");
  CHECK(ExpandOutputPath("100%%.pb").value() == "100%.pb");
  CHECK(ExpandOutputPath("plain.pb").value() == "plain.pb");
}

TEST_CASE("a RANK with a slash or other odd characters stays one file name in the chosen directory") {
  setenv("RANK", "../../etc/x", 1);
  CHECK(ExpandOutputPath("out/trace-%r.pb").value() == "out/trace-.._.._etc_x.pb");
  setenv("RANK", "3 $(id)\n", 1);
  CHECK(ExpandOutputPath("trace-%r.pb").value() == "trace-3___id__.pb");
  setenv("RANK", "node-1_a.b", 1);
  CHECK(ExpandOutputPath("trace-%r.pb").value() == "trace-node-1_a.b.pb");
  unsetenv("RANK");
}

TEST_CASE("unknown or dangling placeholders are usage errors naming the pattern") {
  auto bad = ExpandOutputPath("t%x.pb");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().kind == ErrorKind::kUsage);
  CHECK(bad.error().message.find("%x") != std::string::npos);
  CHECK_FALSE(ExpandOutputPath("t%").ok());
  CHECK_FALSE(ExpandOutputPath("").ok());
}

TEST_CASE("the output directory must exist and be writable, and the path must not be a directory") {
  CHECK(CheckOutputDirectory("trace.pb").ok());
  CHECK(CheckOutputDirectory("/tmp/trace.pb").ok());
  auto missing = CheckOutputDirectory("/tmp/stallprof-no-such-dir-xyz/trace.pb");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message.find("does not exist") != std::string::npos);
  CHECK_FALSE(CheckOutputDirectory("/tmp").ok());
}

TEST_CASE("Run refuses an empty command and a missing output directory before starting anything") {
  RunOptions options;
  CHECK(Run(options).error().kind == ErrorKind::kUsage);
  options.command = {"touch", "/tmp/stallprof-should-not-exist"};
  options.output = "/tmp/stallprof-no-such-dir-xyz/t.pb";
  auto r = Run(options);
  REQUIRE_FALSE(r.ok());
  CHECK(access("/tmp/stallprof-should-not-exist", F_OK) != 0);
}
