// The /proc sampler: every period, CPU time, I/O, RSS, run-queue delay and
// thread count of every process under the launcher, plus machine-wide CPU,
// page cache, available memory and disk reads. Rows are buffered and written
// as ProcessSamples / SystemSamples chunks about once a second.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <vector>

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
  std::map<pid_t, pb::ProcessSamples> processes_;
  pb::SystemSamples system_;
  uint64_t last_flush_ns_ = 0;
  // The full /proc scan for new descendants costs a read of every process's
  // stat, so it runs about once a second; ticks in between sample the known set.
  std::vector<pid_t> known_;
  uint64_t last_scan_ns_ = 0;
};

}  // namespace stallprof::collect
