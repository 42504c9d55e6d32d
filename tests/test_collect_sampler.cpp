// The /proc sampler writes one row per process of the tree per tick and one
// system row per tick, as ProcessSamples / SystemSamples chunks that load back.
#include <catch2/catch.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collect/machine.h"
#include "collect/sampler.h"
#include "trace/reader.h"

using namespace stallprof;
using namespace stallprof::collect;

namespace {
// Forks a child that waits (pause) until killed; returns once it runs.
pid_t ForkWaitingChild() {
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  const pid_t child = fork();
  if (child == 0) {
    char c = 'x';
    if (write(ready[1], &c, 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  char c;
  REQUIRE(read(ready[0], &c, 1) == 1);
  close(ready[0]);
  close(ready[1]);
  return child;
}
}  // namespace

TEST_CASE("each tick samples every process under the root and the system") {
  const std::string path = "/tmp/stallprof-test-sampler-" + std::to_string(getpid()) + ".pb";
  const pid_t child = ForkWaitingChild();
  {
    auto header = DescribeMachine({"test"}, {1 << 20, 4}, 10, 1);
    auto writer = TraceWriter::Create(path, header);
    REQUIRE(writer.ok());
    TraceSink sink(std::move(*writer));
    Sampler sampler(sink, getpid());
    for (int i = 0; i < 3; ++i) {
      sampler.Tick(MonotonicNs());
      usleep(5000);
    }
    sampler.Flush();
    REQUIRE(sink.Close().ok());
  }
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);

  auto t = LoadTrace(path);
  REQUIRE(t.ok());
  REQUIRE(t->process_series.size() == 1);
  const auto& s = t->process_series[0];
  CHECK(s.pid == static_cast<uint32_t>(child));
  CHECK(s.t_ns.size() == 3);
  CHECK(s.t_ns[0] < s.t_ns[2]);
  CHECK(s.rss_bytes[0] > 0);
  CHECK(s.threads[0] == 1);
  REQUIRE(t->processes.size() == 1);
  CHECK(t->processes[0].pid == static_cast<uint32_t>(child));
  CHECK(t->processes[0].ppid == static_cast<uint32_t>(getpid()));
  CHECK(t->system.t_ns.size() == 3);
  CHECK(t->system.cpu_total_ns[2] >= t->system.cpu_total_ns[0]);
  CHECK(t->system.mem_available_bytes[0] > 0);
  // The header describes this machine.
  CHECK(t->header.usable_cores >= 1);
  CHECK(t->header.online_cores >= t->header.usable_cores);
  CHECK(t->header.memory_bytes > 0);
  CHECK(t->header.start_realtime_ns > 0);
  CHECK_FALSE(t->header.kernel.empty());
  CHECK_FALSE(t->header.cwd.empty());
  CHECK(t->header.sample_period_ms == 10);
  std::remove(path.c_str());
}

TEST_CASE("a process first seen on the ring is sampled from the next tick, before the next /proc scan") {
  const std::string path = "/tmp/stallprof-test-sampler-ring-" + std::to_string(getpid()) + ".pb";
  pid_t child = -1;
  {
    auto header = DescribeMachine({"test"}, {1 << 20, 4}, 10, 1);
    auto writer = TraceWriter::Create(path, header);
    REQUIRE(writer.ok());
    TraceSink sink(std::move(*writer));
    Sampler sampler(sink, getpid());
    sampler.Tick(MonotonicNs());  // scans /proc: the worker is not there yet
    child = ForkWaitingChild();   // a DataLoader worker starting, its hook's first record drained
    sink.NoteProcess(child, MonotonicNs(), TraceSink::Seen::kOnRing);
    for (int i = 0; i < 2; ++i) {  // well within the scan's second
      sampler.Tick(MonotonicNs());
      usleep(5000);
    }
    sampler.Flush();
    REQUIRE(sink.Close().ok());
  }
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  auto t = LoadTrace(path);
  REQUIRE(t.ok());
  REQUIRE(t->process_series.size() == 1);
  CHECK(t->process_series[0].pid == static_cast<uint32_t>(child));
  CHECK(t->process_series[0].t_ns.size() == 2);
  std::remove(path.c_str());
}
