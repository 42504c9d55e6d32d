#include "units.h"

#include <cmath>
#include <cstdlib>
#include <fmt/format.h>

namespace stallprof {

namespace {
bool ParseNumberAndSuffix(std::string_view text, double& number, std::string& suffix) {
  std::string s(text);
  if (s.empty()) return false;
  char* end = nullptr;
  number = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || !std::isfinite(number)) return false;
  suffix.assign(end);
  return true;
}

Result<double> Multiplier(std::string suffix, std::string_view flag, std::string_view text) {
  for (auto& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (suffix.ends_with("IB")) suffix.resize(suffix.size() - 2);
  else if (suffix.size() > 1 && suffix.ends_with("B")) suffix.resize(suffix.size() - 1);
  if (suffix.empty() || suffix == "B") return 1.0;
  if (suffix == "K") return 1024.0;
  if (suffix == "M") return 1024.0 * 1024;
  if (suffix == "G") return 1024.0 * 1024 * 1024;
  if (suffix == "T") return 1024.0 * 1024 * 1024 * 1024;
  return UsageError(fmt::format("{} {}: unknown unit '{}', use K, M, G or T (binary)", flag, text, suffix));
}
}  // namespace

Result<uint64_t> ParseBytes(std::string_view text, std::string_view flag) {
  double number = 0;
  std::string suffix;
  if (!ParseNumberAndSuffix(text, number, suffix))
    return UsageError(fmt::format("{} '{}': not a size, expected e.g. 512M or 200G", flag, text));
  if (number < 0) return UsageError(fmt::format("{} {}: a size cannot be negative", flag, text));
  auto mult = Multiplier(suffix, flag, text);
  if (!mult) return mult.error();
  double bytes = number * *mult;
  if (bytes >= 9.2e18) return UsageError(fmt::format("{} {}: too large", flag, text));
  return static_cast<uint64_t>(std::llround(bytes));
}

Result<double> ParseBandwidth(std::string_view text, std::string_view flag) {
  std::string s(text);
  if (!s.ends_with("/s"))
    return UsageError(fmt::format("{} '{}': a bandwidth needs '/s', e.g. 2G/s", flag, text));
  double number = 0;
  std::string suffix;
  if (!ParseNumberAndSuffix(std::string_view(s).substr(0, s.size() - 2), number, suffix))
    return UsageError(fmt::format("{} '{}': not a bandwidth, expected e.g. 500M/s", flag, text));
  if (number <= 0) return UsageError(fmt::format("{} {}: a bandwidth must be positive", flag, text));
  auto mult = Multiplier(suffix, flag, text);
  if (!mult) return mult.error();
  return number * *mult;
}

Result<std::vector<std::string>> SplitList(std::string_view text, std::string_view flag) {
  std::vector<std::string> parts;
  size_t pos = 0;
  while (true) {
    size_t comma = text.find(',', pos);
    std::string part(text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos));
    if (part.empty()) return UsageError(fmt::format("{} '{}': empty item in list", flag, text));
    parts.push_back(part);
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return parts;
}

std::string FormatBytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (std::fabs(bytes) >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  if (u == 0) return fmt::format("{:.0f} B", bytes);
  return fmt::format("{:.{}f} {}", bytes, std::fabs(bytes) < 10 ? 2 : 1, units[u]);
}

std::string FormatSeconds(double s) {
  double a = std::fabs(s);
  if (a >= 1) return fmt::format("{:.2f} s", s);
  if (a >= 1e-3) return fmt::format("{:.2f} ms", s * 1e3);
  if (a >= 1e-6) return fmt::format("{:.1f} us", s * 1e6);
  return fmt::format("{:.0f} ns", s * 1e9);
}

std::string FirstOf(size_t n, std::string_view one, std::string_view many) {
  return n == 1 ? fmt::format("first {}", one) : fmt::format("first {} {}", n, many);
}

}  // namespace stallprof
