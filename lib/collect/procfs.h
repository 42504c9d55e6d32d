// Reading /proc: the launcher's only view of the processes it wraps. Every
// reader tolerates a process that vanished between two reads (returns nullopt).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace stallprof::collect::procfs {

// Whole file, or nullopt when it cannot be opened (process gone, no permission).
std::optional<std::string> ReadFile(const std::string& path);

struct ProcStat {
  uint32_t ppid = 0;
  std::string comm;
  uint64_t cpu_ns = 0;     // utime + stime
  uint64_t rss_bytes = 0;
  uint32_t threads = 0;
  uint64_t minor_faults = 0;  // minflt: page faults served without I/O (first touch, copy-on-write, refault)
};
// /proc/<pid>/stat; nullopt when the process is gone or the line is malformed.
std::optional<ProcStat> ReadStat(pid_t pid);

struct ProcIo {
  uint64_t rchar = 0;
  uint64_t read_bytes = 0;
};
// /proc/<pid>/io; nullopt when unreadable.
std::optional<ProcIo> ReadIo(pid_t pid);

// Run-queue delay of all live threads of `pid` (field 2 of each
// /proc/<pid>/task/*/schedstat), in ns. 0 when unavailable.
uint64_t ReadRunQueueDelay(pid_t pid);

// Every live process whose ancestry leads to `root` (not `root` itself), by a
// ppid scan of /proc (/proc/<pid>/task/*/children is not always compiled in).
std::vector<pid_t> Descendants(pid_t root);

// NUL-separated /proc/<pid>/cmdline as a vector; empty when unreadable.
std::vector<std::string> ReadCmdline(pid_t pid);
// Value of `name` in /proc/<pid>/environ, or nullopt.
std::optional<std::string> ReadEnvVar(pid_t pid, const std::string& name);
// /proc/<pid>/task/<tid>/comm without the newline; "" when gone.
std::string ReadThreadName(pid_t pid, pid_t tid);

// A field of /proc/meminfo in bytes (e.g. "Cached", "MemAvailable"), 0 if absent.
uint64_t MeminfoBytes(const std::string& text, const std::string& field);

struct SystemSnapshot {
  uint64_t cpu_busy_ns = 0;   // all CPUs, cumulative
  uint64_t cpu_total_ns = 0;
  uint64_t page_cache_bytes = 0;
  uint64_t mem_available_bytes = 0;
  uint64_t mem_total_bytes = 0;
  uint64_t disk_read_bytes = 0;  // whole disks, cumulative
};
SystemSnapshot ReadSystem();

// Nanoseconds per clock tick of /proc/<pid>/stat and /proc/stat.
uint64_t NsPerTick();

}  // namespace stallprof::collect::procfs
