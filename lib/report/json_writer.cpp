#include "json_writer.h"

#include <fmt/format.h>

#include "common/utf8.h"

namespace stallprof::report {

void AppendJsonString(std::string& out, std::string_view text) {
  out += '"';
  for (size_t i = 0; i < text.size();) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; ++i; continue;
      case '\\': out += "\\\\"; ++i; continue;
      case '\n': out += "\\n"; ++i; continue;
      case '\t': out += "\\t"; ++i; continue;
      case '\r': out += "\\r"; ++i; continue;
      default: break;
    }
    if (c < 0x20) {
      out += fmt::format("\\u{:04x}", c);
      ++i;
      continue;
    }
    size_t n = Utf8SequenceLength(text, i);
    if (n == 0) {
      out += "\\ufffd";
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  out += '"';
}

JsonWriter& JsonWriter::Number(double v) {
  Separate();
  if (!std::isfinite(v)) {
    out_ += "null";
  } else if (style_.significant_digits > 0) {
    out_ += fmt::format("{:.{}g}", v, style_.significant_digits);
  } else {
    out_ += fmt::format("{}", v);
  }
  return *this;
}

}  // namespace stallprof::report
