// Text from producers and /proc (names, command lines) is arbitrary bytes, but
// the trace's protobuf `string` fields and the JSON reports need valid UTF-8.
#pragma once

#include <string>
#include <string_view>

namespace stallprof {

// `text` with every byte that is not part of a valid UTF-8 sequence replaced by
// U+FFFD; valid text comes back unchanged.
std::string ValidUtf8(std::string_view text);

// Length of the valid UTF-8 sequence starting at text[i] (1-4), or 0 when the
// bytes there are not one (RFC 3629: no overlongs, no surrogates, nothing above
// U+10FFFF, no truncated sequence). i < text.size().
size_t Utf8SequenceLength(std::string_view text, size_t i);

}  // namespace stallprof
