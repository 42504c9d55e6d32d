// Helpers for client tests: the client's attach state is per process, so each
// scenario runs the client in a forked child while the test process owns the
// segment and drains it.
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "ring/consumer.h"

namespace stallprof::testing {

// A fresh ring segment for one test (fails the test when it cannot be made).
inline std::unique_ptr<ring::Segment> MakeSegment(uint64_t bytes = 4 << 20, uint32_t lanes = 16) {
  auto segment = ring::Segment::Create(bytes, lanes);
  REQUIRE(segment.ok());
  return std::move(segment).value();
}

// Result of a child: exit code (or 128+signal) and what it wrote to stderr.
struct ChildResult {
  int exit_code = -1;
  std::string err;
};

// Waits for `child`, returning 128+N for a signal death.
inline int WaitExit(pid_t child) {
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

// Runs `body` in a forked child with STALLPROF_RING set to `ring_env` (unset
// when empty), draining `segment` into `visitor` while it runs.
inline ChildResult RunInChild(ring::Segment* segment, ring::Visitor* visitor, const std::string& ring_env,
                              const std::function<int()>& body) {
  int err_pipe[2];
  REQUIRE(pipe(err_pipe) == 0);
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    dup2(err_pipe[1], 2);
    close(err_pipe[0]);
    if (ring_env.empty()) unsetenv("STALLPROF_RING");
    else setenv("STALLPROF_RING", ring_env.c_str(), 1);
    _exit(body());
  }
  close(err_pipe[1]);
  fcntl(err_pipe[0], F_SETFL, O_NONBLOCK);
  ChildResult result;
  int status = 0;
  for (;;) {
    if (segment != nullptr && visitor != nullptr) segment->DrainOnce(*visitor);
    char buf[512];
    ssize_t n;
    while ((n = read(err_pipe[0], buf, sizeof buf)) > 0) result.err.append(buf, static_cast<size_t>(n));
    pid_t done = waitpid(child, &status, WNOHANG);
    if (done == child) break;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  char buf[512];
  ssize_t n;
  while ((n = read(err_pipe[0], buf, sizeof buf)) > 0) result.err.append(buf, static_cast<size_t>(n));
  close(err_pipe[0]);
  if (segment != nullptr && visitor != nullptr) segment->ReclaimLanes(*visitor);
  result.exit_code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
  return result;
}

// <build>/tests/tools/<name>: from STALLPROF_BUILD_DIR (ctest), else next to this test binary.
inline std::string ToolPath(const std::string& name) {
  if (const char* build = std::getenv("STALLPROF_BUILD_DIR")) return std::string(build) + "/tests/tools/" + name;
  char self[4096] = {0};
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  std::string dir = n > 0 ? std::string(self, static_cast<size_t>(n)) : std::string("./x");
  dir = dir.substr(0, dir.rfind('/'));
  return dir + "/tools/" + name;
}

}  // namespace stallprof::testing
