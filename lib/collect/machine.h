// Machine metadata for the trace header: what the run's numbers must be read
// against (cores, memory, page cache, clock, kernel) and when it started.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trace.pb.h"

namespace stallprof::collect {

struct RingGeometry {
  uint64_t bytes = 0;
  uint32_t lanes = 0;
};

// CPU ns per byte that reading cached data costs (the kernel's copy), timed on
// a memfd; 0 when it cannot be measured. Lets the model estimate what storage
// misses cost the reading thread from its system time (docs/model.md).
double MeasurePageCacheCopyNsPerByte();

// How this kernel reclaims page cache: "mglru" when `lru_gen_enabled` (the
// contents of /sys/kernel/mm/lru_gen/enabled, a hex mask) has its lowest bit
// set, else "lists" (also when the file is missing: a kernel built without
// MGLRU).
std::string PageReclaimPolicy(const std::string& lru_gen_enabled_path = "/sys/kernel/mm/lru_gen/enabled");

// The memory cgroup limit of the process whose /proc/<pid>/cgroup is
// `proc_cgroup`, with the cgroup file systems mounted at `root`: v1's
// hierarchical_memory_limit (the lowest on its way up), or v2's lowest
// memory.max from its group up; 0 when there is none (v1 writes "none" as
// about 2^63, v2 as "max") or it cannot be read.
uint64_t MemoryCgroupLimitBytes(const std::string& proc_cgroup = "/proc/self/cgroup",
                                const std::string& root = "/sys/fs/cgroup");

// The CPU quota of that process's cgroup, in cores: v1's cpu.cfs_quota_us
// over cpu.cfs_period_us, or v2's cpu.max, the lowest from its group up (a
// container's --cpus, a pod's CPU limit); 0 when there is none. Threads past
// the quota in a period wait for the next one as run-queue delay.
double CpuQuotaCores(const std::string& proc_cgroup = "/proc/self/cgroup", const std::string& root = "/sys/fs/cgroup");

// Fills a header from this machine and process. Never fails: a value that
// cannot be read is left 0 / empty.
pb::TraceHeader DescribeMachine(const std::vector<std::string>& command, RingGeometry ring, uint32_t sample_ms,
                                uint64_t run_id);

// The largest --ring-size a run accepts: half of this machine's physical
// memory. Lane pages, once touched, stay resident for the whole run (about
// 47 B per event in flight), so a ring beyond that can push the training job
// itself into swap or the OOM killer.
uint64_t MaxRingBytes();

uint64_t MonotonicNs();
uint64_t RandomRunId();

}  // namespace stallprof::collect
