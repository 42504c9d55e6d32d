// Fuzz target: the trace reader over arbitrary bytes. The input becomes a file
// (a memfd, no disk) that LoadTrace, LoadForAnalysis and Analyze must either
// load or reject with an error value: never crash, hang or read out of bounds.
// Built for libFuzzer (clang) or for tests/fuzz/driver.cpp (any compiler).
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "analysis/analysis.h"
#include "trace/reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  stallprof::QuietProtobufLog();
  const int fd = memfd_create("fuzz-trace", MFD_CLOEXEC);
  if (fd < 0) return 0;
  size_t done = 0;
  while (done < size) {
    const ssize_t n = write(fd, data + done, size - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (auto trace = stallprof::LoadTrace(path); trace.ok()) {
    volatile size_t spans = trace->spans.size();
    (void)spans;
  }
  if (auto digest = stallprof::analysis::LoadForAnalysis(path); digest.ok()) {
    stallprof::analysis::AnalysisOptions options;
    (void)stallprof::analysis::Analyze(*digest, options);
  }
  close(fd);
  return 0;
}
