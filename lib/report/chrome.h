// Chrome trace-event JSON ({"traceEvents":[...]}) for ui.perfetto.dev and
// chrome://tracing, streamed chunk by chunk from trace.pb: only the string,
// thread and process tables are kept in memory, never the spans.
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"

namespace stallprof::report {

struct ExportStats {
  uint64_t spans = 0;      // complete events ("X")
  uint64_t instants = 0;   // instant events ("i")
  uint64_t counters = 0;   // counter events ("C"): counter spans and sampler ticks
  uint64_t metadata = 0;   // process_name / thread_name events ("M")
  bool truncated = false;  // the trace ended inside a chunk; what came before was exported
  uint64_t bytes_written = 0;  // bytes in the output file
  uint64_t json_bytes = 0;     // the JSON before compression (= bytes_written without it)
  bool gzip = false;
};

// Writes `trace_path` as Chrome JSON to `out_path` ("-" = stdout), gzipped
// when `out_path` ends in ".gz". Times are microseconds since the trace's
// start. Each event's argument is named for what it holds ("batch",
// "read_bytes", "system_cpu_ns"; "arg" for user spans) and threads are named
// by their role (ThreadRoles: "main (loader train)", "worker 2 of loader
// train", "pin-memory (loader train)"). The file appears only when complete
// (written beside it, then renamed). InputError when the trace is unreadable
// or corrupt, RuntimeError when the output cannot be written.
Result<ExportStats> ExportChrome(const std::string& trace_path, const std::string& out_path);

}  // namespace stallprof::report
