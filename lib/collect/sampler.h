// The /proc sampler: every period, CPU time, I/O, RSS, run-queue delay and
// thread count of every process under the launcher, plus machine-wide CPU,
// page cache, available memory and disk reads. Rows are buffered and written
// as ProcessSamples / SystemSamples chunks about once a second.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <vector>

#include "procfs.h"
#include "sink.h"
#include "trace.pb.h"

namespace stallprof::collect {

class Sampler {
 public:
  Sampler(TraceSink& sink, pid_t root) : sink_(sink), root_(root) {}
  // Takes one sample of the tree under `root` and of the system at `now_ns`;
  // writes buffered rows once they span about a second.
  void Tick(uint64_t now_ns);
  // Writes whatever rows are buffered.
  void Flush();

 private:
  TraceSink& sink_;
  pid_t root_;
  // The files every tick reads, kept open (a third to a half of their cost);
  // a job of more threads than this reads the rest by path.
  static constexpr size_t kMaxOpenFiles = 256;
  procfs::Files files_{kMaxOpenFiles};
  std::map<pid_t, pb::ProcessSamples> processes_;
  pb::SystemSamples system_;
  uint64_t last_flush_ns_ = 0;
  // New descendants are looked for about once a second (procfs::Descendants);
  // ticks in between sample the known set and the processes new on the ring.
  std::vector<pid_t> known_;
  uint64_t last_scan_ns_ = 0;
};

}  // namespace stallprof::collect
