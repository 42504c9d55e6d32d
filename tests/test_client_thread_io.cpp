// stallprof_thread_io: the calling thread's rchar/read_bytes from
// /proc/thread-self/io, per thread, -1 when not attached; stallprof_thread_system_ns.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "stallprof/client.h"
#include "tools/client_test_util.h"

using stallprof::testing::MakeSegment;
using stallprof::testing::RunInChild;

namespace {

constexpr size_t kFileBytes = 1 << 20;

bool HaveThreadIo() { return access("/proc/thread-self/io", R_OK) == 0; }

// A temp file of kFileBytes; its path, or "" when it cannot be made.
std::string MakeFile() {
  char path[] = "/tmp/stallprof-thread-io.XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return "";
  std::vector<char> block(kFileBytes, 'x');
  const bool ok = write(fd, block.data(), block.size()) == static_cast<ssize_t>(block.size());
  close(fd);
  if (!ok) {
    unlink(path);
    return "";
  }
  return path;
}

// Reads the whole file with read(); the number of bytes read, or -1.
long ReadAll(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  std::vector<char> buf(64 << 10);
  long total = 0;
  ssize_t n;
  while ((n = read(fd, buf.data(), buf.size())) > 0) total += n;
  close(fd);
  return n < 0 ? -1 : total;
}

}  // namespace

TEST_CASE("thread_io: rchar grows by at least the bytes this thread read", "[client]") {
  if (!HaveThreadIo()) {
    WARN("skipped: /proc/thread-self/io does not exist (no per-thread io accounting)");
    return;
  }
  const std::string path = MakeFile();
  REQUIRE(!path.empty());
  auto segment = MakeSegment();
  auto result = RunInChild(segment.get(), nullptr, segment->EnvValue(), [&] {
    uint64_t r0 = 0, b0 = 0, r1 = 0, b1 = 0;
    if (stallprof_thread_io(&r0, &b0) != 0) return 10;
    if (ReadAll(path) != static_cast<long>(kFileBytes)) return 11;
    if (stallprof_thread_io(&r1, &b1) != 0) return 12;
    if (r1 < r0 + kFileBytes) return 13;
    if (b1 < b0) return 14;  // page-cache hits: read_bytes may not grow, never shrinks
    // Per thread: another thread's reads do not show up in ours, and the other
    // thread sees its own reads through its own fd.
    int other = -1;
    std::thread reader([&] {
      uint64_t a0 = 0, x = 0, a1 = 0;
      if (stallprof_thread_io(&a0, &x) != 0) return;
      if (ReadAll(path) != static_cast<long>(kFileBytes)) return;
      if (stallprof_thread_io(&a1, &x) != 0) return;
      other = a1 >= a0 + kFileBytes ? 0 : 1;
    });
    reader.join();
    if (other != 0) return 15;
    uint64_t r2 = 0, b2 = 0;
    if (stallprof_thread_io(&r2, &b2) != 0) return 16;
    if (r2 - r1 >= kFileBytes) return 17;
    return 0;
  });
  unlink(path.c_str());
  INFO(result.err);
  CHECK(result.exit_code == 0);
}

TEST_CASE("thread_io: a forked child reads its own thread's counters", "[client]") {
  if (!HaveThreadIo()) {
    WARN("skipped: /proc/thread-self/io does not exist");
    return;
  }
  const std::string path = MakeFile();
  REQUIRE(!path.empty());
  auto segment = MakeSegment();
  auto result = RunInChild(segment.get(), nullptr, segment->EnvValue(), [&] {
    uint64_t r0 = 0, b = 0;
    // Opens the fd in this process, then reads a lot: a grandchild must not
    // keep reading these counters through the inherited fd.
    if (stallprof_thread_io(&r0, &b) != 0) return 10;
    if (ReadAll(path) != static_cast<long>(kFileBytes)) return 11;
    pid_t child = fork();
    if (child == 0) {
      uint64_t c = 0, x = 0;
      if (stallprof_thread_io(&c, &x) != 0) _exit(20);
      // A fresh process has read far less than this parent's 1 MiB.
      _exit(c < kFileBytes ? 0 : 21);
    }
    return stallprof::testing::WaitExit(child);
  });
  unlink(path.c_str());
  INFO(result.err);
  CHECK(result.exit_code == 0);
}

TEST_CASE("thread_io: -1 and outputs untouched when not attached", "[client]") {
  auto result = RunInChild(nullptr, nullptr, "", [] {
    uint64_t rchar = 7, read_bytes = 9;
    if (stallprof_thread_io(&rchar, &read_bytes) != -1) return 10;
    return rchar == 7 && read_bytes == 9 ? 0 : 11;
  });
  CHECK(result.exit_code == 0);
  auto bad = RunInChild(nullptr, nullptr, "/nonexistent/stallprof-ring", [] {
    uint64_t rchar = 7, read_bytes = 9;
    return stallprof_thread_io(&rchar, &read_bytes) == -1 && rchar == 7 && read_bytes == 9 ? 0 : 10;
  });
  CHECK(bad.exit_code == 0);
}

TEST_CASE("thread_system_ns: grows with this thread's kernel work, -1 when not attached", "[client]") {
  auto segment = MakeSegment();
  auto result = RunInChild(segment.get(), nullptr, segment->EnvValue(), [] {
    uint64_t s0 = 0, s1 = 0;
    if (stallprof_thread_system_ns(&s0) != 0) return 10;
    // Kernel work: many small reads of /dev/zero, about 20 ms of system time.
    int fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 11;
    char buf[64];
    timespec start{}, now{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start);
    do {
      for (int i = 0; i < 1000; ++i)
        if (read(fd, buf, sizeof buf) != static_cast<ssize_t>(sizeof buf)) return 12;
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    } while ((now.tv_sec - start.tv_sec) * 1000000000L + (now.tv_nsec - start.tv_nsec) < 200000000L);
    close(fd);
    if (stallprof_thread_system_ns(&s1) != 0) return 13;
    // 200 ms of CPU spent mostly in read(): at least a quarter of it shows as system time.
    return s1 >= s0 + 50000000u ? 0 : 14;
  });
  CHECK(result.exit_code == 0);
  auto detached = RunInChild(nullptr, nullptr, "", [] {
    uint64_t system_ns = 7;
    return stallprof_thread_system_ns(&system_ns) == -1 && system_ns == 7 ? 0 : 10;
  });
  CHECK(detached.exit_code == 0);
}
