// /proc readers against this very process and a child of it.
#include <catch2/catch.hpp>
#include <malloc.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <chrono>
#include <ctime>
#include <fstream>
#include <memory>
#include <vector>
#include <filesystem>

#include "collect/machine.h"
#include "collect/procfs.h"

using namespace stallprof::collect;

TEST_CASE("our own stat shows CPU time, RSS, threads and the right parent") {
  // Burn a little CPU so utime is non-zero at tick resolution.
  const clock_t until = clock() + CLOCKS_PER_SEC / 20;
  volatile uint64_t x = 0;
  while (clock() < until) x = x + 1;
  auto st = procfs::ReadStat(getpid());
  REQUIRE(st.has_value());
  CHECK(st->ppid == static_cast<uint32_t>(getppid()));
  CHECK(st->cpu_ns > 0);
  CHECK(st->rss_bytes > 1u << 20);
  CHECK(st->threads >= 1);
  CHECK_FALSE(st->comm.empty());
  // Touching 64 fresh pages faults each of them in (minflt), whatever came before.
  const uint64_t faults_before = st->minor_faults;
  const size_t bytes = 64 * 4096;
  void* fresh = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(fresh != MAP_FAILED);
  for (size_t i = 0; i < bytes; i += 4096) static_cast<volatile char*>(fresh)[i] = 1;
  munmap(fresh, bytes);
  auto after = procfs::ReadStat(getpid());
  REQUIRE(after.has_value());
  CHECK(after->minor_faults >= faults_before + 64);
  // 200 ms of CPU mapping, faulting in and unmapping fresh memory: most of it
  // the kernel's (stime, in 10 ms ticks), and stime is part of cpu_ns.
  const uint64_t kernel_before = after->system_cpu_ns;
  const clock_t busy_until = clock() + CLOCKS_PER_SEC / 5;
  while (clock() < busy_until) {
    void* m = mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) break;  // the check below then fails
    for (size_t i = 0; i < (1 << 20); i += 4096) static_cast<volatile char*>(m)[i] = 1;
    munmap(m, 1 << 20);
  }
  auto kernel_after = procfs::ReadStat(getpid());
  REQUIRE(kernel_after.has_value());
  CHECK(kernel_after->system_cpu_ns >= kernel_before + 60'000'000);
  CHECK(kernel_after->system_cpu_ns <= kernel_after->cpu_ns);
  CHECK_FALSE(procfs::ReadStat(999999999).has_value());
}

TEST_CASE("a forked child and its child are descendants, and vanish once reaped") {
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  pid_t child = fork();
  if (child == 0) {
    pid_t grandchild = fork();
    if (grandchild == 0) {
      pause();
      _exit(0);
    }
    char c = 'x';
    if (write(ready[1], &c, 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  char c;
  REQUIRE(read(ready[0], &c, 1) == 1);
  auto tree = procfs::Descendants(getpid());
  CHECK(tree.size() == 2);
  CHECK(std::find(tree.begin(), tree.end(), child) != tree.end());
  // The children files (where the kernel has them) and the ppid scan find the same tree.
  auto scanned = procfs::DescendantsByScan(getpid());
  std::sort(tree.begin(), tree.end());
  std::sort(scanned.begin(), scanned.end());
  CHECK(scanned == tree);
  CHECK(procfs::ReadEnvVar(child, "PATH").has_value());
  CHECK_FALSE(procfs::ReadCmdline(child).empty());
  for (pid_t p : tree) kill(p, SIGKILL);
  waitpid(child, nullptr, 0);
  close(ready[0]);
  close(ready[1]);
}

TEST_CASE("system counters are plausible") {
  auto s = procfs::ReadSystem();
  CHECK(s.cpu_total_ns > 0);
  CHECK(s.cpu_busy_ns <= s.cpu_total_ns);
  CHECK(s.mem_total_bytes > 0);
  CHECK(s.mem_available_bytes <= s.mem_total_bytes);
  CHECK(procfs::MeminfoBytes("MemTotal:  100 kB\nCached:   3 kB\nSwapCached: 9 kB\n", "Cached") == 3 * 1024);
  CHECK(procfs::MeminfoBytes("SwapCached: 9 kB\n", "Cached") == 0);
}

TEST_CASE("the machine's steal is /proc/stat's eighth field, within the busy time") {
  // cpu user nice system idle iowait irq softirq steal, in clock ticks.
  const auto steal_ns = [] {
    std::ifstream stat("/proc/stat");
    std::string cpu;
    uint64_t field = 0;
    stat >> cpu;
    for (int i = 0; i < 8; ++i) stat >> field;
    return field * (1000000000ull / static_cast<uint64_t>(sysconf(_SC_CLK_TCK)));
  };
  const uint64_t before = steal_ns();
  const auto s = procfs::ReadSystem();
  const uint64_t after = steal_ns();
  CHECK(s.cpu_steal_ns >= before);
  CHECK(s.cpu_steal_ns <= after);
  CHECK(s.cpu_steal_ns <= s.cpu_busy_ns);
}

TEST_CASE("our thread name and run-queue delay are readable") {
  CHECK_FALSE(procfs::ReadThreadName(getpid(), getpid()).empty());
  CHECK(procfs::ReadThreadName(getpid(), 999999999).empty());
  (void)procfs::ReadThreadTimes(getpid());  // 0 is legitimate on an idle machine
}

namespace {
// CPU ns per byte of 32 MiB of page cache (a memfd) read in 1 MiB calls into
// `destination`, the median of 3 passes.
double CopyNsPerByte(char* destination) {
  constexpr size_t kBytes = 32u << 20, kChunk = 1u << 20;
  const int fd = memfd_create("stallprof-test-copy", MFD_CLOEXEC);
  REQUIRE(fd >= 0);
  for (size_t written = 0; written < kBytes; written += kChunk)
    REQUIRE(write(fd, destination, kChunk) == static_cast<ssize_t>(kChunk));
  std::vector<double> passes;
  for (int pass = 0; pass < 3; ++pass) {
    timespec start{}, end{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start);
    for (size_t offset = 0; offset < kBytes; offset += kChunk)
      REQUIRE(pread(fd, destination, kChunk, static_cast<off_t>(offset)) == static_cast<ssize_t>(kChunk));
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &end);
    passes.push_back(((end.tv_sec - start.tv_sec) * 1e9 + (end.tv_nsec - start.tv_nsec)) / kBytes);
  }
  close(fd);
  std::sort(passes.begin(), passes.end());
  return passes[1];
}
}  // namespace

TEST_CASE("the page-cache copy calibration costs what a copy into an aligned buffer costs") {
  // On AMD EPYC (rep movsb) a destination 16 bytes off a 32-byte boundary, as
  // malloc's mmap'd chunks are, copies about 4x slower; the calibration must
  // not depend on where its buffer landed. Interleaved, medians of 3. A fixed
  // mmap threshold has malloc serve every 1 MiB buffer by mmap, as the
  // launcher's did (glibc's dynamic threshold would move it to the heap).
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  std::unique_ptr<char, decltype(&std::free)> aligned(static_cast<char*>(std::aligned_alloc(4096, 2u << 20)),
                                                      &std::free);
  REQUIRE(aligned);
  std::memset(aligned.get(), 1, 2u << 20);
  std::vector<double> reference, calibrated;
  for (int round = 0; round < 3; ++round) {
    reference.push_back(CopyNsPerByte(aligned.get()));
    calibrated.push_back(stallprof::collect::MeasurePageCacheCopyNsPerByte());
  }
  std::sort(reference.begin(), reference.end());
  std::sort(calibrated.begin(), calibrated.end());
  INFO("aligned copy " << reference[1] << " ns/byte, calibration " << calibrated[1]);
  CHECK(calibrated[1] < 2 * reference[1]);
  CHECK(calibrated[1] > reference[1] / 2);
}

TEST_CASE("the page-cache copy cost per byte is measured and plausible") {
  const double ns_per_byte = stallprof::collect::MeasurePageCacheCopyNsPerByte();
  // Between 100 GB/s and 50 MB/s of CPU per byte copied: anything outside is a unit or timing error.
  CHECK(ns_per_byte > 0.01);
  CHECK(ns_per_byte < 20);
}

namespace {
size_t OpenFds() {
  size_t n = 0;
  for ([[maybe_unused]] auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}
}  // namespace

TEST_CASE("a kept /proc file reads fresh values and fails once its process is reaped") {
  const pid_t child = fork();
  if (child == 0) {
    pause();
    _exit(0);
  }
  procfs::Files files(8);
  const size_t fds_before = OpenFds();
  auto first = procfs::ReadStat(child, files);
  REQUIRE(first.has_value());
  CHECK(first->ppid == static_cast<uint32_t>(getpid()));
  CHECK(OpenFds() == fds_before + 1);  // kept open
  // Our own stat, read twice through the same kept file, moves with our CPU.
  auto mine = procfs::ReadStat(getpid(), files);
  REQUIRE(mine.has_value());
  const clock_t until = clock() + CLOCKS_PER_SEC / 20;
  volatile uint64_t x = 0;
  while (clock() < until) x = x + 1;
  auto mine_later = procfs::ReadStat(getpid(), files);
  REQUIRE(mine_later.has_value());
  CHECK(mine_later->cpu_ns > mine->cpu_ns);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  CHECK_FALSE(procfs::ReadStat(child, files).has_value());
  // Files not read since the last sweep close at the next.
  files.Sweep();
  files.Sweep();
  CHECK(OpenFds() == fds_before);
}

TEST_CASE("files over the limit are opened and closed on each read") {
  procfs::Files files(1);
  const size_t fds_before = OpenFds();
  for (int i = 0; i < 3; ++i) {
    CHECK(procfs::ReadIo(getpid(), files).has_value());
    CHECK(procfs::ReadStat(getpid(), files).has_value());
    CHECK(procfs::ReadSystem(files).cpu_total_ns > 0);
  }
  CHECK(OpenFds() == fds_before + 1);
  procfs::Files none;
  CHECK(procfs::ReadStat(getpid(), none).has_value());
  CHECK(OpenFds() == fds_before + 1);
}

TEST_CASE("the threads' times read through kept files match those read by path") {
  procfs::Files files(64);
  const auto by_path = procfs::ReadThreadTimes(getpid());
  const auto kept = procfs::ReadThreadTimes(getpid(), files);
  const auto by_path_after = procfs::ReadThreadTimes(getpid());
  CHECK(kept.delay_ns >= by_path.delay_ns);
  CHECK(kept.delay_ns <= by_path_after.delay_ns);
  CHECK(kept.main_cpu_ns >= by_path.main_cpu_ns);
  CHECK(kept.main_cpu_ns <= by_path_after.main_cpu_ns);
  CHECK(procfs::ReadThreadTimes(getpid(), files).delay_ns >= kept.delay_ns);
}

TEST_CASE("the main thread's CPU is its own, not the process's other threads'") {
  // A thread that burns 200 ms of CPU while the main thread waits, and is
  // still alive when its times are read: the main thread's time grows by
  // far less.
  const auto before = procfs::ReadThreadTimes(getpid());
  std::atomic<bool> burnt{false}, read{false};
  std::thread burner([&] {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    volatile uint64_t spin = 0;
    while (std::chrono::steady_clock::now() < until) spin = spin + 1;
    burnt = true;
    while (!read) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  while (!burnt) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const auto after = procfs::ReadThreadTimes(getpid());
  read = true;
  burner.join();
  CHECK(after.main_cpu_ns > before.main_cpu_ns);  // it read the files at least
  CHECK(after.main_cpu_ns - before.main_cpu_ns < 50'000'000);
  CHECK(after.main_delay_ns >= before.main_delay_ns);
}

TEST_CASE("The kernel's page reclaim is MGLRU when lru_gen's mask has its lowest bit, else the lists") {
  const std::string path = (std::filesystem::temp_directory_path() / ("stallprof-lru-gen-" + std::to_string(getpid()))).string();
  auto policy_of = [&](const char* contents) {
    std::ofstream(path) << contents;
    return PageReclaimPolicy(path);
  };
  CHECK(policy_of("0x0007\n") == "mglru");
  CHECK(policy_of("0x0001\n") == "mglru");
  CHECK(policy_of("0x0000\n") == "lists");
  CHECK(policy_of("0x0006\n") == "lists");  // the optional features without the switch
  std::remove(path.c_str());
  CHECK(PageReclaimPolicy(path) == "lists");  // no file: a kernel built without MGLRU
}

namespace {
// Fake /proc/<pid>/cgroup files and cgroup trees in a scratch directory,
// removed at the end: case "x" is x.cgroup with its trees under x/.
struct FakeCgroups {
  const std::filesystem::path root =
      std::filesystem::temp_directory_path() / ("stallprof-cgroup-" + std::to_string(getpid()));
  ~FakeCgroups() { std::filesystem::remove_all(root); }
  void write(const std::string& relative, const std::string& contents) const {
    std::filesystem::create_directories((root / relative).parent_path());
    std::ofstream(root / relative) << contents;
  }
  std::string cgroup_file(const std::string& name) const { return (root / (name + ".cgroup")).string(); }
  std::string tree(const std::string& name) const { return (root / name).string(); }
};
}  // namespace

TEST_CASE("The memory cgroup limit is v1's hierarchical limit or v2's lowest memory.max on the way up, 0 without one") {
  const FakeCgroups fake;
  const auto write = [&](const std::string& relative, const std::string& contents) { fake.write(relative, contents); };
  constexpr uint64_t kMiB = 1ull << 20;
  // v1: the parent's 300 MiB (the hierarchical limit) under the group's own 1 GiB.
  write("v1.cgroup", "12:cpuset:/\n5:memory:/job\n0::/\n");
  write("v1/memory/job/memory.limit_in_bytes", std::to_string(1024 * kMiB) + "\n");
  write("v1/memory/job/memory.stat", "cache 1\nhierarchical_memory_limit " + std::to_string(300 * kMiB) + "\n");
  // v2: the group's "max", its parent's 400 MiB, the root's 1 GiB.
  write("v2.cgroup", "0::/a/b\n");
  write("v2/memory.max", std::to_string(1024 * kMiB) + "\n");
  write("v2/a/memory.max", std::to_string(400 * kMiB) + "\n");
  write("v2/a/b/memory.max", "max\n");
  // No limit: v1's about 2^63, and v2's "max" all the way up.
  write("free1.cgroup", "5:memory:/\n");
  write("free1/memory/memory.limit_in_bytes", "9223372036854771712\n");
  write("free1/memory/memory.stat", "hierarchical_memory_limit 9223372036854771712\n");
  write("free2.cgroup", "0::/x\n");
  write("free2/x/memory.max", "max\n");
  auto limit = [&](const std::string& name) { return MemoryCgroupLimitBytes(fake.cgroup_file(name), fake.tree(name)); };
  CHECK(limit("v1") == 300 * kMiB);
  CHECK(limit("v2") == 400 * kMiB);
  CHECK(limit("free1") == 0);
  CHECK(limit("free2") == 0);
  CHECK(limit("missing") == 0);  // no /proc/<pid>/cgroup to read
}

TEST_CASE("The CPU quota is v1's cfs quota over its period or v2's cpu.max, the lowest on the way up, 0 without one") {
  const FakeCgroups fake;
  const auto write = [&](const std::string& relative, const std::string& contents) { fake.write(relative, contents); };
  // v1, cpu and cpuacct mounted together (Debian, Docker): the group's
  // 3 cores under its parent's 1.5 (150 ms every 100 ms).
  write("v1.cgroup", "4:memory:/job\n2:cpu,cpuacct:/pod/job\n0::/\n");
  write("v1/cpu,cpuacct/cgroup.procs", "1\n");
  write("v1/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
  write("v1/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  write("v1/cpu,cpuacct/pod/cpu.cfs_quota_us", "150000\n");
  write("v1/cpu,cpuacct/pod/cpu.cfs_period_us", "100000\n");
  write("v1/cpu,cpuacct/pod/job/cpu.cfs_quota_us", "150000\n");
  write("v1/cpu,cpuacct/pod/job/cpu.cfs_period_us", "50000\n");
  // v1 with cpu mounted alone: half a core.
  write("alone.cgroup", "1:cpu:/half\n");
  write("alone/cpu/half/cpu.cfs_quota_us", "50000\n");
  write("alone/cpu/half/cpu.cfs_period_us", "100000\n");
  // v2: the group's 2 cores, its parent's "max", the root's none.
  write("v2.cgroup", "0::/a/b\n");
  write("v2/a/cpu.max", "max 100000\n");
  write("v2/a/b/cpu.max", "200000 100000\n");
  // No quota: v1's -1 and v2's "max".
  write("free1.cgroup", "1:cpu:/x\n");
  write("free1/cpu/x/cpu.cfs_quota_us", "-1\n");
  write("free1/cpu/x/cpu.cfs_period_us", "100000\n");
  write("free2.cgroup", "0::/x\n");
  write("free2/x/cpu.max", "max 100000\n");
  auto quota = [&](const std::string& name) { return CpuQuotaCores(fake.cgroup_file(name), fake.tree(name)); };
  CHECK(quota("v1") == 1.5);
  CHECK(quota("alone") == 0.5);
  CHECK(quota("v2") == 2);
  CHECK(quota("free1") == 0);
  CHECK(quota("free2") == 0);
  CHECK(quota("missing") == 0);  // no /proc/<pid>/cgroup to read
}
