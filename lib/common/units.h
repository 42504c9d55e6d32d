// Parsing and printing of sizes, bandwidths and durations for flags and reports.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "result.h"

namespace stallprof {

// "64M", "200G", "1.5T", "4096" -> bytes. K/M/G/T are binary (KiB...); an
// optional trailing "B"/"iB" is accepted. Fails on negative, zero-less junk or
// unknown units, naming the flag.
Result<uint64_t> ParseBytes(std::string_view text, std::string_view flag);
// "2G/s", "500M/s" -> bytes per second (the "/s" is required). Must be > 0.
Result<double> ParseBandwidth(std::string_view text, std::string_view flag);
// "a,b,c" -> parts (no empty parts).
Result<std::vector<std::string>> SplitList(std::string_view text, std::string_view flag);

// 1536 -> "1.5 KiB"; 0 -> "0 B".
std::string FormatBytes(double bytes);
// seconds -> "12.3 ms", "4.56 s", "850 us".
std::string FormatSeconds(double seconds);
// (1, "fetch", "fetches") -> "first fetch"; (4, ...) -> "first 4 fetches".
std::string FirstOf(size_t n, std::string_view one, std::string_view many);

}  // namespace stallprof
