// uPlot, the chart library the HTML report inlines for its long series (zoom,
// pan, values on hover). It is not part of the source tree: scripts/setup.sh
// installs a pinned version from npm, the build copies its minified script,
// stylesheet and license next to the binary, and `report` reads them from
// there, so the page stays one self-contained file.
#pragma once

#include <string>

#include "common/result.h"

namespace stallprof::report {

struct ChartLibrary {
  std::string script;      // uPlot.iife.min.js, the license first as a comment
  std::string stylesheet;  // uPlot.min.css
};

// uPlot from beside the running executable: <dir>/uplot/ in the build tree,
// <prefix>/share/stallprof/uplot/ when installed. UnsupportedError naming
// where it looked when the files are missing or unreadable (the report then
// draws static SVG instead).
Result<ChartLibrary> LoadChartLibrary();

// The same from one directory (tests).
Result<ChartLibrary> LoadChartLibraryFrom(const std::string& dir);

}  // namespace stallprof::report
