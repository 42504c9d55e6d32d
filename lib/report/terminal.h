// Text that the profiled job recorded (stage, loader and dataset names, command
// lines, hostnames, paths) is arbitrary bytes chosen by that job. Written raw to
// a terminal, an escape sequence in a stage name could retitle the window,
// clear the screen or hide lines. Every recorded string a text report prints
// goes through TerminalSafe, as HTML and JSON output go through their escapers.
#pragma once

#include <string>
#include <string_view>

namespace stallprof::report {

// `text` with every control character shown as an escape: ESC as \e, newline,
// tab and carriage return as \n, \t, \r, any other C0/C1 control, DEL, and
// every byte that is not valid UTF-8 as \xNN, and the bidirectional overrides
// (U+202A..U+202E, U+2066..U+2069), which reorder what the terminal shows, as
// \u{NNNN}. Printable text, UTF-8 included, comes back unchanged.
std::string TerminalSafe(std::string_view text);

}  // namespace stallprof::report
