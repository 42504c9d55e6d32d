// `stallprof run`: wraps a command, records its input pipeline into trace.pb.
// The launcher creates the ring, starts the command with the hook in its
// environment, drains the ring and samples /proc while it runs, and returns the
// command's own exit status.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "ring/stallprof_ring.h"
#include "ring/tsc_clock.h"

namespace stallprof::collect {

// Whether the one-line live status is drawn on stderr (only ever on a terminal).
enum class LiveStatus { kAuto, kOff };

struct RunOptions {
  std::vector<std::string> command;  // argv; command[0] is looked up on PATH
  std::string output = "trace.pb";   // %r rank, %h hostname, %p launcher pid
  uint64_t ring_bytes = 64ull << 20;
  uint32_t lanes = SP_DEFAULT_LANES;
  uint32_t sample_ms = 100;
  LiveStatus live_status = LiveStatus::kAuto;
  // After the command exits, how long its leftover descendants may keep
  // running (and writing to the ring) before the trace is closed.
  uint32_t grace_ms = 2000;
  // After a job whose loaders had no workers, time what a worker's handoff of
  // their batches costs (handoff.h), a few seconds.
  bool time_handoffs = true;
};

struct RunSummary {
  int exit_code = 0;        // what stallprof returns: the child's code, 128+N for signal N, 127 exec failure
  int term_signal = 0;      // signal that ended the child, 0 if it exited
  std::string trace_path;   // the expanded output path
  uint64_t spans = 0;       // spans, instants and counters written
  uint64_t dropped = 0;     // records lost: in full lanes, and laneless_dropped
  uint64_t laneless_dropped = 0;  // records of threads that found every lane taken
  uint64_t invalid = 0;     // records the consumer rejected
  uint64_t trace_bytes = 0;
  double duration_s = 0;    // from start to the trace being closed
  // The command could not be executed (exit_code 127 not found, 126 not
  // executable); no trace is written and an existing file at the path is kept.
  std::optional<Error> launch_error;
  bool trace_written = true;
  // Writing the trace failed part way (disk full): the file holds what came
  // before, its footer (when it fits) says where it ends, and the message
  // says how much was lost.
  std::optional<Error> write_error;
  std::vector<std::string> warnings;  // for stderr after the run ("stallprof: warning: ...")
  std::vector<std::string> notes;     // for stderr after the summary line, unless quiet ("stallprof: note: ...")
  bool incomplete = false;   // the trace lacks events the run produced (write failure)
  uint64_t events_lost = 0;  // spans that could not be written
};

// Runs `options.command` to completion. A Result error means the command could
// not be started at all (bad output path, no shared memory); the command
// failing, crashing or not existing (exit 127) is a RunSummary, not an error.
Result<RunSummary> Run(const RunOptions& options);

// Replaces %r (RANK of this process, or 0; characters other than
// [A-Za-z0-9_.-] become '_'), %h (hostname), %p (our pid) and %%
// in `pattern`. UsageError on an unknown placeholder.
Result<std::string> ExpandOutputPath(const std::string& pattern);

// "-E", "-I" or "-S" when `command` is a python interpreter given one of
// those flags: each keeps the bootstrap sitecustomize (and so the hook) from
// loading, and nothing is recorded.
std::optional<std::string> PythonFlagSkippingHook(const std::vector<std::string>& command);

// True when `command` is torchrun or python -m torch.distributed.run/launch:
// every rank it starts records into the one trace of this run.
bool IsTorchrun(const std::vector<std::string>& command);

// The clock the clients time spans with: a calibrated TSC when the CPU has an
// invariant one, else none (CLOCK_MONOTONIC). STALLPROF_CLOCK=monotonic
// forces CLOCK_MONOTONIC; =tsc warns (into `warnings`) when there is no TSC.
ring::TscClock ChooseSpanClock(std::vector<std::string>& warnings);

// UsageError unless the directory that will hold `path` exists and is writable.
Status CheckOutputDirectory(const std::string& path);

}  // namespace stallprof::collect
