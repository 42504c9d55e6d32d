// Text from producers and /proc (names, command lines) is arbitrary bytes, but
// the trace's protobuf `string` fields and the JSON reports need valid UTF-8.
#pragma once

#include <string>
#include <string_view>

namespace stallprof {

// `text` with every byte that is not part of a valid UTF-8 sequence replaced by
// U+FFFD; valid text comes back unchanged.
std::string ValidUtf8(std::string_view text);

}  // namespace stallprof
