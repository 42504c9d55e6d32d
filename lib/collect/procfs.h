// Reading /proc: the launcher's only view of the processes it wraps. Every
// reader tolerates a process that vanished between two reads (returns nullopt).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace stallprof::collect::procfs {

// Whole file, or nullopt when it cannot be opened (process gone, no permission).
std::optional<std::string> ReadFile(const std::string& path);

// /proc files kept open between reads. Reading an open file again (pread from
// 0) skips the path walk: on the 2-core VM a process's stat, io and run-queue
// delay (task dir and a schedstat) cost 7.2, 3.2 and 4.6 us that way against
// 13.7, 9.3 and 15.7 us opened each time (scripts/bench_sampler.sh). An open /proc/<pid>/... file
// answers for that process only: once it is reaped, reads fail, even if its
// pid is reused, and the file is opened anew by path.
class Files {
 public:
  // Holds at most `max_open` files; beyond that (and with 0) a read opens and
  // closes its file, so a job of thousands of threads stays under the fd limit.
  explicit Files(size_t max_open = 0) : max_open_(max_open) {}
  ~Files();
  Files(const Files&) = delete;
  Files& operator=(const Files&) = delete;
  // The whole file, or nullopt when it cannot be read; valid until the next Read.
  std::optional<std::string_view> Read(const std::string& path);
  // The numeric entries of a directory (pids, tids); empty when unreadable.
  std::vector<pid_t> ListNumeric(const std::string& dir);
  // Closes the files not read since the last Sweep (exited processes, threads).
  void Sweep();
  // Whether /sys/block/<name> exists, asked once per name.
  bool IsBlockDevice(const std::string& name);

 private:
  struct Open {
    int fd = -1;
    bool used = true;
  };
  // The open file for `path`, opening and keeping it while there is room; -1 when it cannot be opened.
  int FdFor(const std::string& path, int flags, bool& keep);
  void Drop(const std::string& path);

  size_t max_open_;
  std::unordered_map<std::string, Open> open_;
  std::unordered_map<std::string, bool> block_devices_;
  std::string buffer_;
};

struct ProcStat {
  uint32_t ppid = 0;
  std::string comm;
  uint64_t cpu_ns = 0;     // utime + stime
  uint64_t system_cpu_ns = 0;  // stime: in the kernel on the process's behalf (page faults, syscalls)
  uint64_t rss_bytes = 0;
  uint32_t threads = 0;
  uint64_t minor_faults = 0;  // minflt: page faults served without I/O (first touch, copy-on-write, refault)
};
// /proc/<pid>/stat; nullopt when the process is gone or the line is malformed.
std::optional<ProcStat> ReadStat(pid_t pid);
std::optional<ProcStat> ReadStat(pid_t pid, Files& files);

struct ProcIo {
  uint64_t rchar = 0;
  uint64_t read_bytes = 0;
};
// /proc/<pid>/io; nullopt when unreadable.
std::optional<ProcIo> ReadIo(pid_t pid);
std::optional<ProcIo> ReadIo(pid_t pid, Files& files);

// From each /proc/<pid>/task/*/schedstat (time on CPU, run-queue delay): the
// delay of all live threads of `pid`, and the main thread's (tid = pid) time
// on CPU and delay, in ns; 0 when unavailable. The main thread's own apart
// from the process's: the training step runs there, beside threads (queue
// feeders, a pin-memory thread) that a loop without workers does not have.
struct ThreadTimes {
  uint64_t delay_ns = 0;
  uint64_t main_cpu_ns = 0;
  uint64_t main_delay_ns = 0;
};
ThreadTimes ReadThreadTimes(pid_t pid);
ThreadTimes ReadThreadTimes(pid_t pid, Files& files);

// Every live process whose ancestry leads to `root` (not `root` itself): from
// the threads' /proc/<pid>/task/<tid>/children files, down the tree, where the
// kernel has them (CONFIG_PROC_CHILDREN), else by a ppid scan of all of /proc
// (a read of every process's stat: 0.95 ms a scan with 66 processes on the VM
// against 0.06 ms, and growing with the machine's processes, not the job's).
std::vector<pid_t> Descendants(pid_t root);
// The same by the ppid scan alone.
std::vector<pid_t> DescendantsByScan(pid_t root);

// NUL-separated /proc/<pid>/cmdline as a vector; empty when unreadable.
std::vector<std::string> ReadCmdline(pid_t pid);
// Value of `name` in /proc/<pid>/environ, or nullopt.
std::optional<std::string> ReadEnvVar(pid_t pid, const std::string& name);
// /proc/<pid>/task/<tid>/comm without the newline; "" when gone.
std::string ReadThreadName(pid_t pid, pid_t tid);

// A field of /proc/meminfo in bytes (e.g. "Cached", "MemAvailable"), 0 if absent.
uint64_t MeminfoBytes(std::string_view text, const std::string& field);

struct SystemSnapshot {
  uint64_t cpu_busy_ns = 0;   // all CPUs, cumulative
  uint64_t cpu_total_ns = 0;
  uint64_t cpu_steal_ns = 0;  // of cpu_busy_ns, the hypervisor's (steal), cumulative
  uint64_t page_cache_bytes = 0;
  uint64_t mem_available_bytes = 0;
  uint64_t mem_total_bytes = 0;
  uint64_t disk_read_bytes = 0;  // whole disks, cumulative
};
SystemSnapshot ReadSystem();
SystemSnapshot ReadSystem(Files& files);

// Nanoseconds per clock tick of /proc/<pid>/stat and /proc/stat.
uint64_t NsPerTick();

}  // namespace stallprof::collect::procfs
