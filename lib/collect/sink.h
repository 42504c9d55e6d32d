// The one place the drain and sampler threads write the trace through: a
// TraceWriter behind a mutex, the trace-global string table, and the set of
// processes already described (each gets one ProcessInfo chunk).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "trace/writer.h"

namespace stallprof::collect {

class TraceSink {
 public:
  explicit TraceSink(std::unique_ptr<TraceWriter> writer) : writer_(std::move(writer)) {}
  // Writes `chunk` after any strings interned since the last write. The first
  // write error is kept (see status()) and later writes are skipped.
  void Write(const pb::Chunk& chunk);
  // Same, for a chunk given as its protobuf encoding that holds `events` spans
  // (counted as lost when the chunk cannot be written).
  void WriteEncoded(std::string_view chunk_bytes, uint64_t events = 0);
  // Trace-global id of `text`; new strings are written before the next chunk.
  uint32_t Intern(const std::string& text);
  // Who saw a process: the sampler may see it between fork and exec, before
  // its environment (RANK, ...) and command line are final; a process that
  // attached to the ring has exec'd for good.
  enum class Seen { kBySampler, kOnRing };
  // Writes a ProcessInfo chunk for `pid` the first time it is seen, and once
  // more when it first shows up on the ring after the sampler described it
  // (readers keep the last description).
  void NoteProcess(pid_t pid, uint64_t now_ns, Seen seen);
  // The processes first seen on the ring since the last call: the sampler
  // samples them from its next tick, not only from its next /proc scan
  // (about a second apart: a short-lived worker would get a sample or none).
  std::vector<pid_t> TakeNewOnRing();
  // After a write error: one more attempt at `footer`, which says where the
  // trace ends (cutting the failed chunk may have freed room for it).
  void WriteFooterAfterFailure(const pb::Chunk& footer);
  // Renames the trace from its temporary name to its final one (see
  // TraceWriter::Publish), or removes it when the run never started.
  Status Publish();
  void Discard();
  // Flushes pending strings, fsyncs and closes.
  Status Close();
  // The first write error, if any.
  Status status() const;
  uint64_t bytes_written() const;
  // CLOCK_MONOTONIC time of the first failed write (0: none), its errno, and
  // the spans written before and lost from then on.
  uint64_t failed_at_ns() const;
  int failed_errno() const;
  uint64_t events_written() const;
  uint64_t events_lost() const;

 private:
  void WriteLocked(const pb::Chunk& chunk);
  void FlushStringsLocked();
  mutable std::mutex mu_;
  std::unique_ptr<TraceWriter> writer_;
  Status status_;
  uint64_t failed_at_ns_ = 0;
  int failed_errno_ = 0;
  uint64_t events_written_ = 0;
  uint64_t events_lost_ = 0;
  void NoteResult(const Status& s, uint64_t events);
  std::unordered_map<std::string, uint32_t> ids_;
  uint32_t next_id_ = 1;  // 0 is ""
  std::vector<std::string> pending_;
  uint32_t pending_first_ = 1;
  std::unordered_set<pid_t> described_;
  std::unordered_set<pid_t> described_from_ring_;
  std::vector<pid_t> new_on_ring_;  // since the last TakeNewOnRing
};

}  // namespace stallprof::collect
