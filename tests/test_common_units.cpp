#include <catch2/catch.hpp>

#include "common/units.h"

using namespace stallprof;

TEST_CASE("sizes take binary K/M/G/T suffixes") {
  CHECK(ParseBytes("4096", "--cache").value() == 4096);
  CHECK(ParseBytes("64M", "--cache").value() == 64ull << 20);
  CHECK(ParseBytes("200G", "--cache").value() == 200ull << 30);
  CHECK(ParseBytes("1.5K", "--cache").value() == 1536);
  CHECK(ParseBytes("2GiB", "--cache").value() == 2ull << 30);
  CHECK(ParseBytes("0", "--cache").value() == 0);
}

TEST_CASE("bad sizes are usage errors that name the flag") {
  auto neg = ParseBytes("-5G", "--cache");
  REQUIRE_FALSE(neg.ok());
  CHECK(neg.error().kind == ErrorKind::kUsage);
  CHECK(neg.error().message.find("--cache") != std::string::npos);
  CHECK_FALSE(ParseBytes("12X", "--cache").ok());
  CHECK_FALSE(ParseBytes("G", "--cache").ok());
  CHECK_FALSE(ParseBytes("", "--cache").ok());
}

TEST_CASE("bandwidths need a per-second suffix and a positive value") {
  CHECK(ParseBandwidth("2G/s", "--disk-bw").value() == Approx(2.0 * (1ull << 30)));
  CHECK_FALSE(ParseBandwidth("2G", "--disk-bw").ok());
  CHECK_FALSE(ParseBandwidth("0M/s", "--disk-bw").ok());
  CHECK_FALSE(ParseBandwidth("fastM/s", "--disk-bw").ok());
}

TEST_CASE("lists split on commas and reject empty items") {
  auto parts = SplitList("2,4,8", "--cores").value();
  CHECK(parts == std::vector<std::string>{"2", "4", "8"});
  CHECK_FALSE(SplitList("2,,8", "--cores").ok());
}

TEST_CASE("byte and second formatting is human readable") {
  CHECK(FormatBytes(0) == "0 B");
  CHECK(FormatBytes(1536) == "1.50 KiB");
  CHECK(FormatSeconds(0.0123) == "12.30 ms");
}

TEST_CASE("the first of a count reads without a count of one") {
  CHECK(FirstOf(1, "fetch", "fetches") == "first fetch");
  CHECK(FirstOf(4, "fetch", "fetches") == "first 4 fetches");
}
