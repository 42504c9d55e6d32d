// Attaching: disabled without STALLPROF_RING, refusal of another ABI major,
// bad paths, and an exec'd program finding the ring through the environment.
#include <signal.h>

#include <catch2/catch.hpp>
#include <cstdio>

#include "stallprof/client.h"
#include "tools/client_test_util.h"
#include "tools/test_producer.h"

using stallprof::ring::Segment;
using stallprof::testing::MakeSegment;
using stallprof::testing::RecordingVisitor;
using stallprof::testing::RunInChild;
using stallprof::testing::ToolPath;

TEST_CASE("Without STALLPROF_RING attach says disabled and every call is a harmless no-op", "[client]") {
  auto result = RunInChild(nullptr, nullptr, "", [] {
    if (stallprof_attach() != STALLPROF_DISABLED) return 10;
    if (stallprof_attach() != STALLPROF_DISABLED) return 11;  // idempotent
    if (stallprof_enabled() != 0) return 12;
    if (stallprof_name("x") != 0) return 13;
    stallprof_span_complete(1, 0, 1, 2, 3);
    stallprof_span s;
    stallprof_span_begin(&s, 1, 0, STALLPROF_SPAN_CPU);
    stallprof_span_end(&s, 1);
    stallprof_instant(1, 0, 0);
    stallprof_counter(1, 5);
    stallprof_config_str(0, "k", "v");
    stallprof_config_u64(0, "k", 1);
    stallprof_config_f64(0, "k", 1.5);
    if (stallprof_new_scope() != 0) return 14;
    stallprof_thread_release();
    return stallprof_dropped() == 0 ? 0 : 15;
  });
  CHECK(result.exit_code == 0);
  CHECK(result.err.empty());
}

TEST_CASE("A ring with another ABI major is refused with one line and the host carries on", "[client]") {
  auto segment = MakeSegment();
  segment->header()->abi_major = SP_ABI_MAJOR + 1;
  RecordingVisitor visitor;
  auto result = RunInChild(segment.get(), &visitor, segment->EnvValue(), [] {
    if (stallprof_attach() != STALLPROF_ERR_VERSION) return 10;
    if (stallprof_attach() != STALLPROF_ERR_VERSION) return 11;
    const uint32_t name = stallprof_name("x");
    for (int i = 0; i < 100; ++i) stallprof_span_complete(name, 0, 1, i, 0);
    stallprof_instant(name, 0, 0);
    return 0;
  });
  CHECK(result.exit_code == 0);
  CHECK(result.err == "stallprof: ring ABI 2.x is not supported by this client (1.x); not recording\n");
  CHECK(visitor.events.empty());
  CHECK(visitor.owners.empty());
}

TEST_CASE("A STALLPROF_RING that names no ring is reported once and nothing is recorded", "[client]") {
  for (const char* path : {"/nonexistent/ring", "/dev/null", "/etc/hostname"}) {
    auto result = RunInChild(nullptr, nullptr, path, [] {
      if (stallprof_attach() != STALLPROF_ERR_ATTACH) return 10;
      stallprof_span_complete(stallprof_name("x"), 0, 1, 0, 0);
      return stallprof_attach() == STALLPROF_ERR_ATTACH ? 0 : 11;
    });
    CHECK(result.exit_code == 0);
    CHECK(result.err.rfind("stallprof: ", 0) == 0);
    CHECK(std::count(result.err.begin(), result.err.end(), '\n') == 1);
  }
}

TEST_CASE("An exec'd program attaches through STALLPROF_RING and its spans arrive", "[client]") {
  auto segment = MakeSegment(16 << 20, 4);
  RecordingVisitor visitor;
  const std::string tool = ToolPath("ring_producer");
  auto result = RunInChild(segment.get(), &visitor, segment->EnvValue(), [&] {
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    execl(tool.c_str(), tool.c_str(), "2", "5000", static_cast<char*>(nullptr));
    return 99;
  });
  REQUIRE(result.exit_code == 0);
  CHECK(visitor.events.size() + segment->TotalDropped() == 10000);
  CHECK(visitor.events.size() > 0);
  CHECK(visitor.owners.size() == 2);
  for (auto& e : visitor.events) CHECK(e.name == "seq");
}

TEST_CASE("The lane of a SIGKILLed exec'd producer is reclaimed", "[client]") {
  auto segment = MakeSegment();
  int out[2];
  REQUIRE(pipe(out) == 0);
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    setenv("STALLPROF_RING", segment->EnvValue().c_str(), 1);
    dup2(out[1], 1);
    const std::string tool = ToolPath("ring_producer");
    execl(tool.c_str(), tool.c_str(), "0", "10", "hold", static_cast<char*>(nullptr));
    _exit(99);
  }
  close(out[1]);
  std::string text;
  char buf[256];
  ssize_t n;
  while (text.find("ready") == std::string::npos && (n = read(out[0], buf, sizeof buf)) > 0) text.append(buf, n);
  close(out[0]);
  REQUIRE(text.find("ready") != std::string::npos);
  RecordingVisitor visitor;
  segment->ReclaimLanes(visitor);
  CHECK(visitor.events.size() == 10);
  CHECK(visitor.released.empty());
  kill(child, SIGKILL);
  stallprof::testing::WaitExit(child);
  segment->ReclaimLanes(visitor);
  REQUIRE(visitor.released.size() == 1);
  CHECK(visitor.released[0].first.pid == static_cast<uint32_t>(child));
}
