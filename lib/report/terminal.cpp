#include "terminal.h"

#include <fmt/core.h>

#include "common/utf8.h"

namespace stallprof::report {

std::string TerminalSafe(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x20 || byte == 0x7f) {
      switch (byte) {
        case 0x1b: out += "\\e"; break;
        case '\n': out += "\\n"; break;
        case '\t': out += "\\t"; break;
        case '\r': out += "\\r"; break;
        default: out += fmt::format("\\x{:02x}", byte);
      }
      ++i;
      continue;
    }
    if (byte < 0x80) {
      out.push_back(static_cast<char>(byte));
      ++i;
      continue;
    }
    const size_t n = Utf8SequenceLength(text, i);
    if (n == 0) {
      out += fmt::format("\\x{:02x}", byte);
      ++i;
      continue;
    }
    // Decode the code point to spot C1 controls (U+0080..U+009F, e.g. the
    // 8-bit CSI U+009B) and the bidirectional overrides.
    uint32_t cp = byte & (0xff >> (n + 1));
    for (size_t k = 1; k < n; ++k) cp = cp << 6 | (static_cast<unsigned char>(text[i + k]) & 0x3f);
    if ((cp >= 0x80 && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069)) {
      out += fmt::format("\\u{{{:04x}}}", cp);
    } else {
      out.append(text.substr(i, n));
    }
    i += n;
  }
  return out;
}

}  // namespace stallprof::report
