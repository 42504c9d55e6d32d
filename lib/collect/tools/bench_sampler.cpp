// The /proc sampler's CPU per tick, and what its parts cost: each file read
// through files kept open (procfs::Files, pread from 0) against opened by path
// each time, and the descendant search by children files against the ppid
// scan of all of /proc. Three children that sleep stand in for a job.
// Usage: bench_sampler [ticks, default 2000]
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <functional>

#include <fmt/format.h>

#include "collect/machine.h"
#include "collect/procfs.h"
#include "collect/sampler.h"

using namespace stallprof;
using namespace stallprof::collect;

namespace {
double ThreadCpuNs() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec);
}

// CPU microseconds per call of `f`, over `n` calls.
double UsPerCall(int n, const std::function<void()>& f) {
  const double start = ThreadCpuNs();
  for (int i = 0; i < n; ++i) f();
  return (ThreadCpuNs() - start) / n / 1e3;
}
}  // namespace

int main(int argc, char** argv) {
  const int ticks = argc > 1 ? std::atoi(argv[1]) : 2000;
  if (ticks <= 0) {
    fmt::print(stderr, "bench_sampler: bad tick count '{}'\n", argv[1]);
    return 2;
  }
  pid_t children[3];
  for (pid_t& child : children) {
    child = fork();
    if (child == 0) {
      pause();
      _exit(0);
    }
  }
  const std::string path = fmt::format("/tmp/stallprof-bench-sampler-{}.pb", getpid());
  {
    auto writer = TraceWriter::Create(path, DescribeMachine({"bench_sampler"}, {1 << 20, 4}, 100, 1));
    if (!writer.ok()) {
      fmt::print(stderr, "bench_sampler: {}\n", writer.error().message);
      return 1;
    }
    TraceSink sink(std::move(*writer));
    Sampler sampler(sink, getpid());
    uint64_t now = MonotonicNs();
    // Ticks 100 ms apart in the sampler's eyes: a descendant search every tenth.
    const double tick_us = UsPerCall(ticks, [&] { sampler.Tick(now += 100'000'000); });
    sampler.Flush();
    (void)sink.Close();
    fmt::print("Sampler::Tick, 3 processes of one thread: {:.1f} us CPU a tick (a descendant search every 10th)\n",
               tick_us);
  }
  unlink(path.c_str());

  procfs::Files kept(64), by_path;
  const pid_t pid = children[0];
  for (auto [name, read] : std::initializer_list<std::pair<const char*, std::function<void(procfs::Files&)>>>{
           {"stat", [&](procfs::Files& f) { (void)procfs::ReadStat(pid, f); }},
           {"io", [&](procfs::Files& f) { (void)procfs::ReadIo(pid, f); }},
           {"threads' times (task dir + schedstat)", [&](procfs::Files& f) { (void)procfs::ReadThreadTimes(pid, f); }},
           {"system (/proc/stat, meminfo, diskstats)", [&](procfs::Files& f) { (void)procfs::ReadSystem(f); }}}) {
    const double open_us = UsPerCall(ticks, [&] { read(by_path); });
    const double kept_us = UsPerCall(ticks, [&] { read(kept); });
    fmt::print("{:<42} opened each time {:6.2f} us, kept open {:6.2f} us ({:.2f}x)\n", name, open_us, kept_us,
               open_us / kept_us);
  }
  const int searches = std::max(ticks / 10, 10);
  const double children_us = UsPerCall(searches, [] { (void)procfs::Descendants(getpid()); });
  const double scan_us = UsPerCall(searches, [] { (void)procfs::DescendantsByScan(getpid()); });
  fmt::print("descendant search: children files {:.1f} us, ppid scan of /proc {:.1f} us ({:.1f}x)\n", children_us,
             scan_us, scan_us / children_us);
  for (pid_t child : children) {
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
  }
  return 0;
}
