#include "machine.h"

#include <sched.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <span>
#include <vector>

#include "common/utf8.h"
#include "procfs.h"
#include "trace/reader.h"

#ifndef STALLPROF_VERSION
#define STALLPROF_VERSION "0.0.0"
#endif

namespace stallprof::collect {

uint64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t MaxRingBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return 1ull << 30;  // unknown machine: 1 GiB is safe anywhere we run
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size) / 2;
}

uint64_t RandomRunId() {
  uint64_t id = 0;
  if (getrandom(&id, sizeof(id), 0) != sizeof(id)) id = MonotonicNs() ^ (static_cast<uint64_t>(getpid()) << 40);
  return id;
}

double MeasurePageCacheCopyNsPerByte() {
  // A memfd's pages are page cache: reading them back costs what a page-cache
  // hit costs the reader (lookup and copy to user memory). The source must be
  // larger than the CPU caches, as a dataset is: reading one 4 MiB file again
  // and again into a 4 MiB buffer measured 0.058 ns/byte on the 2-core VM,
  // while Python reading a dataset's cached 512 KiB files took 0.2 (and
  // 32 MiB read in 1 MiB calls here 0.13-0.18), so the CPU that storage
  // misses cost, estimated as system CPU less this copy, came out too high.
  // The median of 3 passes over 32 MiB, about 15 ms of CPU.
  //
  // The buffer is page-aligned: on the VM's AMD EPYC (rep movsb, FSRM) a copy
  // into a destination 16 bytes off a 32-byte boundary costs 0.64 ns/byte
  // against 0.17 aligned, and a vector of 1 MiB lands there whenever malloc
  // serves it by mmap (chunk + 16). The launcher's calibration then read
  // 0.45-0.79 where a dataset's cached reads cost 0.2, so the estimate of the
  // CPU a storage miss costs (system time less this copy) came out a third of
  // what removing the misses saved (validation's indexed case: -46% to -63%).
  constexpr size_t kBytes = 32u << 20, kChunk = 1u << 20;
  const int fd = memfd_create("stallprof-calibrate", MFD_CLOEXEC);
  if (fd < 0) return 0;
  struct FreeAligned {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, FreeAligned> aligned(static_cast<char*>(std::aligned_alloc(4096, kChunk)));
  if (!aligned) {
    close(fd);
    return 0;
  }
  std::memset(aligned.get(), 1, kChunk);
  std::span<char> buffer(aligned.get(), kChunk);
  size_t written = 0;
  while (written < kBytes && write(fd, buffer.data(), kChunk) == static_cast<ssize_t>(kChunk)) written += kChunk;
  std::vector<double> passes;
  if (written == kBytes) {
    auto thread_ns = [] {
      timespec t{};
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
      return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec);
    };
    for (int pass = 0; pass < 3; ++pass) {
      const double start = thread_ns();
      size_t read_total = 0;
      for (size_t offset = 0; offset < kBytes; offset += kChunk) {
        const ssize_t n = pread(fd, buffer.data(), kChunk, static_cast<off_t>(offset));
        if (n <= 0) break;
        read_total += static_cast<size_t>(n);
      }
      if (read_total == 0) break;
      passes.push_back((thread_ns() - start) / static_cast<double>(read_total));
    }
  }
  close(fd);
  if (passes.empty()) return 0;
  std::sort(passes.begin(), passes.end());
  return passes[passes.size() / 2];
}

namespace {
// A file's leading number (0 when it is missing or starts otherwise: "max").
double LeadingNumber(const std::optional<std::string>& text) {
  return text && !text->empty() && std::isdigit(static_cast<unsigned char>((*text)[0])) ? std::strtod(text->c_str(), nullptr)
                                                                                      : 0;
}

// The lowest positive value `read(group directory)` gives over the process's
// group and every group above it, in the v1 hierarchy holding
// `v1_controller` (mounted at root/<its controllers>, e.g. "cpu,cpuacct", or
// root/<controller>) or else in the unified v2 hierarchy (at root); 0 when
// none gives one. A limit anywhere up the tree bounds the group: a
// container's is often set on a parent its processes cannot see beyond.
double LowestUpTheCgroup(const std::string& proc_cgroup, const std::string& root, const std::string& v1_controller,
                         const std::function<double(const std::string&)>& read_v1,
                         const std::function<double(const std::string&)>& read_v2) {
  const std::optional<std::string> groups = procfs::ReadFile(proc_cgroup);
  if (!groups) return 0;
  const auto lowest_up = [](std::string group, const std::string& mount, const auto& read) {
    double lowest = 0;
    while (true) {
      const double value = read(mount + (group.empty() ? "" : "/" + group));
      if (value > 0) lowest = lowest == 0 ? value : std::min(lowest, value);
      if (group.empty()) return lowest;
      const size_t slash = group.rfind('/');
      group = slash == std::string::npos ? "" : group.substr(0, slash);
    }
  };
  std::istringstream lines(*groups);
  std::string line;
  while (std::getline(lines, line)) {
    // "hierarchy-id:controllers:path"
    const size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string hierarchy = line.substr(0, first), controllers = line.substr(first + 1, second - first - 1);
    std::string path = line.substr(second + 1);
    while (!path.empty() && path.front() == '/') path.erase(0, 1);
    double value = 0;
    if (("," + controllers + ",").find("," + v1_controller + ",") != std::string::npos) {
      const std::string mount = procfs::ReadFile(root + "/" + controllers + "/cgroup.procs") ? root + "/" + controllers
                                                                                             : root + "/" + v1_controller;
      value = lowest_up(path, mount, read_v1);
    } else if (hierarchy == "0" && controllers.empty()) {
      value = lowest_up(path, root, read_v2);
    }
    if (value > 0) return value;
  }
  return 0;
}
}  // namespace

uint64_t MemoryCgroupLimitBytes(const std::string& proc_cgroup, const std::string& root) {
  const auto stat_field = [](const std::optional<std::string>& text, const std::string& key) -> double {
    if (!text) return 0;
    std::istringstream in(*text);
    std::string name;
    double value = 0;
    while (in >> name >> value)
      if (name == key) return value;
    return 0;
  };
  constexpr double kNoLimit = 1ull << 60;  // v1 writes "none" as about 2^63
  const auto limit = [&](double bytes) { return bytes < kNoLimit ? bytes : 0; };
  const double bytes = LowestUpTheCgroup(
      proc_cgroup, root, "memory",
      [&](const std::string& group) {
        // v1's hierarchical limit is already the lowest above the group.
        const double hierarchical = limit(stat_field(procfs::ReadFile(group + "/memory.stat"), "hierarchical_memory_limit"));
        return hierarchical > 0 ? hierarchical : limit(LeadingNumber(procfs::ReadFile(group + "/memory.limit_in_bytes")));
      },
      [&](const std::string& group) { return limit(LeadingNumber(procfs::ReadFile(group + "/memory.max"))); });
  return static_cast<uint64_t>(bytes);
}

double CpuQuotaCores(const std::string& proc_cgroup, const std::string& root) {
  // v1: cpu.cfs_quota_us (-1: none) over cpu.cfs_period_us; v2: cpu.max, "max 100000" or "150000 100000".
  return LowestUpTheCgroup(
      proc_cgroup, root, "cpu",
      [](const std::string& group) {
        const double quota = LeadingNumber(procfs::ReadFile(group + "/cpu.cfs_quota_us"));
        const double period = LeadingNumber(procfs::ReadFile(group + "/cpu.cfs_period_us"));
        return quota > 0 && period > 0 ? quota / period : 0;
      },
      [](const std::string& group) {
        const std::optional<std::string> max = procfs::ReadFile(group + "/cpu.max");
        if (!max) return 0.0;
        std::istringstream in(*max);
        std::string quota;
        double period = 0;
        if (!(in >> quota >> period) || period <= 0) return 0.0;
        const double q = LeadingNumber(quota);
        return q > 0 ? q / period : 0.0;
      });
}

std::string PageReclaimPolicy(const std::string& lru_gen_enabled_path) {
  const std::optional<std::string> mask = procfs::ReadFile(lru_gen_enabled_path);  // e.g. "0x0007"
  return mask && (std::strtoul(mask->c_str(), nullptr, 16) & 1) ? "mglru" : "lists";
}

pb::TraceHeader DescribeMachine(const std::vector<std::string>& command, RingGeometry ring, uint32_t sample_ms,
                                uint64_t run_id) {
  pb::TraceHeader h;
  h.set_version_major(kTraceVersionMajor);
  h.set_version_minor(kTraceVersionMinor);
  h.set_tool_version(STALLPROF_VERSION);
  for (const auto& arg : command) h.add_command(ValidUtf8(arg));
  char host[HOST_NAME_MAX + 1] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) h.set_hostname(host);
  utsname u{};
  if (uname(&u) == 0) h.set_kernel(std::string(u.sysname) + " " + u.release);
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) h.set_usable_cores(static_cast<uint32_t>(CPU_COUNT(&set)));
  h.set_online_cores(static_cast<uint32_t>(sysconf(_SC_NPROCESSORS_ONLN)));
  const auto sys = procfs::ReadSystem();
  h.set_memory_bytes(sys.mem_total_bytes);
  h.set_page_cache_bytes(sys.page_cache_bytes);
  h.set_memory_limit_bytes(MemoryCgroupLimitBytes());
  h.set_cpu_quota_cores(CpuQuotaCores());
  // The two clocks read back to back: the realtime value aligns hosts.
  timespec mono{}, real{};
  clock_gettime(CLOCK_MONOTONIC, &mono);
  clock_gettime(CLOCK_REALTIME, &real);
  h.set_start_monotonic_ns(static_cast<uint64_t>(mono.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(mono.tv_nsec));
  h.set_start_realtime_ns(static_cast<int64_t>(real.tv_sec) * 1'000'000'000ll + real.tv_nsec);
  timespec res{};
  if (clock_getres(CLOCK_MONOTONIC, &res) == 0)
    h.set_clock_resolution_ns(static_cast<uint64_t>(res.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(res.tv_nsec));
  h.set_ring_bytes(ring.bytes);
  h.set_ring_lanes(ring.lanes);
  h.set_sample_period_ms(sample_ms);
  h.set_run_id(run_id);
  char cwd[PATH_MAX] = {};
  if (getcwd(cwd, sizeof(cwd))) h.set_cwd(cwd);
  h.set_page_cache_copy_ns_per_byte(MeasurePageCacheCopyNsPerByte());
  if (const long page = sysconf(_SC_PAGESIZE); page > 0) h.set_page_bytes(static_cast<uint32_t>(page));
  h.set_page_reclaim(PageReclaimPolicy());
  return h;
}

}  // namespace stallprof::collect
