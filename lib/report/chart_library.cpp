#include "chart_library.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace stallprof::report {

namespace fs = std::filesystem;

namespace {

bool ReadFile(const fs::path& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream text;
  text << in.rdbuf();
  out = text.str();
  return !in.bad();
}

}  // namespace

Result<ChartLibrary> LoadChartLibraryFrom(const std::string& dir) {
  ChartLibrary library;
  std::string license;
  const fs::path base(dir);
  if (!ReadFile(base / "uPlot.iife.min.js", library.script) || !ReadFile(base / "uPlot.min.css", library.stylesheet) ||
      library.script.empty())
    return UnsupportedError("uPlot is not in " + dir);
  // The page inlines the script: a "</script" inside it would end the element early.
  if (library.script.find("</script") != std::string::npos || library.stylesheet.find("</style") != std::string::npos)
    return UnsupportedError("uPlot in " + dir + " cannot be inlined (it contains a closing tag)");
  if (ReadFile(base / "LICENSE", license) && license.find("*/") == std::string::npos)
    library.script = "/* uPlot, " + license + "*/\n" + library.script;
  return library;
}

Result<ChartLibrary> LoadChartLibrary() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return UnsupportedError("uPlot was not looked for: /proc/self/exe is unreadable");
  const fs::path dir = exe.parent_path();
  std::string looked_in;
  // Build tree: build/stallprof beside build/uplot/. Installed: <prefix>/bin/stallprof and <prefix>/share/stallprof/uplot/.
  for (const fs::path& candidate : {dir / "uplot", dir.parent_path() / "share" / "stallprof" / "uplot"}) {
    auto library = LoadChartLibraryFrom(candidate.string());
    if (library.ok()) return library;
    looked_in += (looked_in.empty() ? "" : " nor in ") + candidate.string();
  }
  return UnsupportedError("uPlot is not in " + looked_in);
}

}  // namespace stallprof::report
