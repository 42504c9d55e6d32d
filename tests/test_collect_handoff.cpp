// The worker-handoff timing after a job without workers (collect/handoff.h):
// the hook's request files, the calibration's output line, and a calibration
// that fails or hangs.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "collect/handoff.h"

using namespace stallprof::collect;
namespace fs = std::filesystem;

namespace {
struct TempDir {
  fs::path path;
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "stallprof-test-handoff.XXXXXX").string();
    path = mkdtemp(pattern.data());
  }
  ~TempDir() { fs::remove_all(path); }
};

// An executable shell script standing in for the job's Python.
std::string Script(const fs::path& dir, const std::string& body) {
  const fs::path path = dir / "python";
  std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
  fs::permissions(path, fs::perms::owner_all);
  return path.string();
}
}  // namespace

TEST_CASE("A handoff request names the loader, the job's Python and its batch's tensor sizes") {
  auto r = ParseHandoffRequest("4242 3\n/usr/bin/python3\n786432 128\n");
  REQUIRE(r.ok());
  CHECK(r->pid == 4242);
  CHECK(r->scope == 3);
  CHECK(r->python == "/usr/bin/python3");
  CHECK(r->bytes == std::vector<uint64_t>{786432, 128});
  CHECK(r->pace_s == 0);  // written at the first batch, before the pace is known
  auto paced = ParseHandoffRequest("4242 3\n/usr/bin/python3\n786432 128\npace_s 0.034500\n");
  REQUIRE(paced.ok());
  CHECK(paced->pace_s == Approx(0.0345));
  CHECK(paced->rss_bytes == 0);
  // The job's resident bytes, after the pace or without it.
  auto sized = ParseHandoffRequest("4242 3\n/usr/bin/python3\n786432 128\npace_s 0.034500\nrss_bytes 2147483648\n");
  REQUIRE(sized.ok());
  CHECK(sized->pace_s == Approx(0.0345));
  CHECK(sized->rss_bytes == 2147483648ull);
  auto unpaced = ParseHandoffRequest("4242 3\n/usr/bin/python3\n786432\nrss_bytes 1048576\n");
  REQUIRE(unpaced.ok());
  CHECK(unpaced->pace_s == 0);
  CHECK(unpaced->rss_bytes == 1048576);
  CHECK(unpaced->batch_size == -1);  // not written: the iterator's own code is not timed
  // A loader with workers: its sampler's indices a batch (0: batch_size=None).
  auto batched = ParseHandoffRequest("4242 3\n/usr/bin/python3\n786432\nworkers 1\nbatch_size 64\n");
  REQUIRE(batched.ok());
  CHECK(batched->had_workers);
  CHECK(batched->batch_size == 64);
  auto unbatched = ParseHandoffRequest("4242 3\n/usr/bin/python3\n786432\nworkers 1\nbatch_size 0\n");
  REQUIRE(unbatched.ok());
  CHECK(unbatched->batch_size == 0);
  // Tabular loaders draw millions of indices a batch.
  auto huge = ParseHandoffRequest("4242 3\n/usr/bin/python3\n786432\nworkers 1\nbatch_size 4194304\n");
  REQUIRE(huge.ok());
  CHECK(huge->batch_size == 4194304);
  // A loader without workers that would spawn them (mp.spawn's ranks, or its
  // multiprocessing_context): the timing starts one that way too.
  auto spawned = ParseHandoffRequest("4242 3\n/usr/bin/python3\n786432\nrss_bytes 1048576\nstart_method spawn\n");
  REQUIRE(spawned.ok());
  CHECK(spawned->start_method == "spawn");
  CHECK(unpaced->start_method.empty());  // not written: an older hook
}

TEST_CASE("A malformed handoff request is refused with the reason") {
  CHECK_FALSE(ParseHandoffRequest("").ok());
  CHECK_FALSE(ParseHandoffRequest("x 3\n/usr/bin/python3\n1\n").ok());
  CHECK_FALSE(ParseHandoffRequest("0 3\n/usr/bin/python3\n1\n").ok());
  CHECK_FALSE(ParseHandoffRequest("12 3\npython3\n1\n").ok());  // a relative Python
  CHECK_FALSE(ParseHandoffRequest("12 3\n/usr/bin/python3\n\n").ok());
  CHECK(ParseHandoffRequest("12 3\n/usr/bin/python3\n-1\n").error().message.find("negative") != std::string::npos);
  CHECK_FALSE(ParseHandoffRequest("12 3\n/usr/bin/python3\n1\npace_s -1\n").ok());
  CHECK_FALSE(ParseHandoffRequest("12 3\n/usr/bin/python3\n1\nspeed 2\n").ok());
  CHECK_FALSE(ParseHandoffRequest("12 3\n/usr/bin/python3\n1\nrss_bytes -5\n").ok());
  CHECK_FALSE(ParseHandoffRequest("12 3\n/usr/bin/python3\n1\nrss_bytes\n").ok());
  CHECK_FALSE(ParseHandoffRequest("12 3\n/usr/bin/python3\n1\nbatch_size 2.5\n").ok());
  CHECK_FALSE(ParseHandoffRequest("12 3\n/usr/bin/python3\n1\nbatch_size -1\n").ok());
  CHECK_FALSE(ParseHandoffRequest("12 3\n/usr/bin/python3\n1\nbatch_size 1e12\n").ok());
  CHECK_FALSE(ParseHandoffRequest("12 3\n/usr/bin/python3\n1\nstart_method thread\n").ok());
  CHECK_FALSE(ParseHandoffRequest("12 3\n/usr/bin/python3\n1\nstart_method spawn now\n").ok());
}

TEST_CASE("Only well-formed .req files in the folder are requests") {
  TempDir dir;
  std::ofstream(dir.path / "1-1.req") << "11 1\n/usr/bin/python3\n100 8\n";
  std::ofstream(dir.path / "2-1.req") << "garbage";
  std::ofstream(dir.path / "3-1.tmp") << "13 1\n/usr/bin/python3\n100\n";  // not yet renamed
  const auto requests = ReadHandoffRequests(dir.path.string());
  REQUIRE(requests.size() == 1);
  CHECK(requests[0].pid == 11);
  CHECK(ReadHandoffRequests((dir.path / "missing").string()).empty());
}

TEST_CASE("The calibration's last result line is read, and one without every figure is refused") {
  auto t = ParseHandoffTiming(
      "warning: something\nloop_cpu_s 0.0016 receive_cpu_s 0.0009 collate_shm_cpu_s 0.004 touch_cpu_s 0.0007 "
      "batches 200 pace_s 0.005\n");
  REQUIRE(t.ok());
  CHECK(t->pace_s == Approx(0.005));
  CHECK(t->loop_cpu_s == Approx(0.0016));
  CHECK(t->receive_cpu_s == Approx(0.0009));
  CHECK(t->collate_shm_cpu_s == Approx(0.004));
  CHECK(t->touch_cpu_s == Approx(0.0007));
  CHECK(t->batches == 200);
  CHECK(t->startup_s == -1);  // not printed: not timed
  CHECK(t->shutdown_s == -1);
  CHECK(t->receive_wall_s == -1);
  CHECK(t->free_cpu_s == -1);
  auto with_free = ParseHandoffTiming(
      "loop_cpu_s 0.0016 receive_cpu_s 0.0009 collate_shm_cpu_s 0.004 touch_cpu_s 0.0007 free_cpu_s 0.00013 batches 200\n");
  REQUIRE(with_free.ok());
  CHECK(with_free->free_cpu_s == Approx(0.00013));
  auto with_startup = ParseHandoffTiming(
      "loop_cpu_s 0.0016 receive_cpu_s 0.0009 receive_wall_s 0.0014 collate_shm_cpu_s 0.004 touch_cpu_s 0.0007 "
      "batches 200 pace_s 0 startup_s 0.031 shutdown_s 0.012\n");
  REQUIRE(with_startup.ok());
  CHECK(with_startup->startup_s == Approx(0.031));
  CHECK(with_startup->shutdown_s == Approx(0.012));
  CHECK(with_startup->receive_wall_s == Approx(0.0014));
  CHECK(with_startup->rss_bytes == -1);  // not printed: not timed
  CHECK(with_startup->fork_s_per_mib == -1);
  auto with_fork = ParseHandoffTiming(
      "loop_cpu_s 0.0016 receive_cpu_s 0.0009 collate_shm_cpu_s 0.004 touch_cpu_s 0.0007 batches 200 "
      "rss_bytes 238026752 fork_s_per_mib 0.000026 exit_s_per_mib 0.000024\n");
  REQUIRE(with_fork.ok());
  CHECK(with_fork->rss_bytes == Approx(238026752));
  CHECK(with_fork->fork_s_per_mib == Approx(0.000026));
  CHECK(with_fork->exit_s_per_mib == Approx(0.000024));
  CHECK(with_fork->next_own_cpu_s == -1);  // not printed: not asked for
  auto with_next = ParseHandoffTiming(
      "loop_cpu_s 0.0016 receive_cpu_s 0.0009 collate_shm_cpu_s 0.004 touch_cpu_s 0.0007 batches 200 "
      "next_own_cpu_s 0.0000046\n");
  REQUIRE(with_next.ok());
  CHECK(with_next->next_own_cpu_s == Approx(0.0000046));
  CHECK(with_next->spawn_startup_s == -1);  // not printed: not asked for
  auto with_spawn = ParseHandoffTiming(
      "loop_cpu_s 0.0016 receive_cpu_s 0.0009 collate_shm_cpu_s 0.004 touch_cpu_s 0.0007 batches 200 "
      "spawn_startup_s 0.708005 spawn_shutdown_s 0.158464 forkserver_startup_s 0.703085 forkserver_shutdown_s 0.009195\n");
  REQUIRE(with_spawn.ok());
  CHECK(with_spawn->spawn_startup_s == Approx(0.708005));
  CHECK(with_spawn->spawn_shutdown_s == Approx(0.158464));
  CHECK(with_spawn->forkserver_startup_s == Approx(0.703085));
  CHECK(with_spawn->forkserver_shutdown_s == Approx(0.009195));
  // Too few calls found their batch made: printed as -1, not timed.
  auto without_wall = ParseHandoffTiming(
      "loop_cpu_s 0.0016 receive_cpu_s 0.0009 receive_wall_s -1.000000000 collate_shm_cpu_s 0.004 touch_cpu_s 0.0007 "
      "batches 200\n");
  REQUIRE(without_wall.ok());
  CHECK(without_wall->receive_wall_s == -1);
  CHECK_FALSE(ParseHandoffTiming("Traceback (most recent call last):\nImportError: no torch\n").ok());
  CHECK_FALSE(ParseHandoffTiming("loop_cpu_s 0.001 batches 200\n").ok());
  CHECK_FALSE(ParseHandoffTiming("loop_cpu_s 0.001 receive_cpu_s 0.001 batches 200\n").ok());  // an older calibration
  CHECK_FALSE(
      ParseHandoffTiming("loop_cpu_s -1 receive_cpu_s 0.001 collate_shm_cpu_s 0 touch_cpu_s 0 batches 200\n").ok());
  CHECK_FALSE(
      ParseHandoffTiming("loop_cpu_s 0.001 receive_cpu_s 0.001 collate_shm_cpu_s nan touch_cpu_s 0 batches 200\n")
          .ok());
}

TEST_CASE("A calibration that exits non-zero is an error with its last line, one that hangs is killed") {
  TempDir dir;
  HandoffRequest r;
  r.pid = 1;
  r.bytes = {64};
  r.python = Script(dir.path, "echo 'ModuleNotFoundError: No module named torch' >&2; exit 1");
  auto failed = TimeHandoffs({&r}, dir.path.string(), 10);
  REQUIRE(failed.size() == 1);
  REQUIRE_FALSE(failed[0].ok());
  CHECK(failed[0].error().message.find("No module named torch") != std::string::npos);

  r.python = Script(dir.path, "exec sleep 30");
  const auto start = std::chrono::steady_clock::now();
  auto hung = TimeHandoffs({&r}, dir.path.string(), 0.5);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE(hung.size() == 1);
  REQUIRE_FALSE(hung[0].ok());
  CHECK(hung[0].error().message.find("longer than") != std::string::npos);
  CHECK(took < 10);
}

TEST_CASE("Several batches are timed in one calibration run, a line each in order") {
  // The arguments it gets: -m stallprof.calibrate_ipc and each batch's
  // sizes with its pace, and for a loader that had workers its batch size
  // (a loader without them measured its iterator's own code itself); it
  // prints a line a batch (a warning between them, a batch whose timing
  // raised as "failed").
  TempDir dir;
  HandoffRequest a, b, c;
  a.bytes = {786432, 128};
  a.pace_s = 0.0345;
  a.batch_size = 16;  // no workers: not passed
  b.bytes = {64};
  b.had_workers = true;
  b.batch_size = 8;
  c.bytes = {32};
  c.had_workers = true;  // its batch size unknown: not passed
  const std::string python =
      Script(dir.path, "[ \"$*\" = '-m stallprof.calibrate_ipc 786432,128@0.034500 64/8 32' ] || exit 3\n"
                       "echo 'loop_cpu_s 0.002 receive_cpu_s 0.001 collate_shm_cpu_s 0.003 touch_cpu_s 0.0004 "
                       "batches 50'\n"
                       "echo 'UserWarning: something'\n"
                       "echo 'failed RuntimeError: unable to open shared memory'\n"
                       "echo 'loop_cpu_s 0.005 receive_cpu_s 0.001 collate_shm_cpu_s 0.003 touch_cpu_s 0.0004 "
                       "batches 20'");
  a.python = b.python = c.python = python;
  auto timed = TimeHandoffs({&a, &b, &c}, dir.path.string(), 10);
  REQUIRE(timed.size() == 3);
  REQUIRE(timed[0].ok());
  CHECK(timed[0]->loop_cpu_s == Approx(0.002));
  CHECK(timed[0]->batches == 50);
  REQUIRE_FALSE(timed[1].ok());
  CHECK(timed[1].error().message.find("unable to open shared memory") != std::string::npos);
  REQUIRE(timed[2].ok());
  CHECK(timed[2]->loop_cpu_s == Approx(0.005));
  // A run that printed fewer lines than batches: the rest are errors.
  const std::string short_python = Script(dir.path, "echo 'loop_cpu_s 0.002 receive_cpu_s 0.001 collate_shm_cpu_s 0.003 "
                                                    "touch_cpu_s 0.0004 batches 50'");
  a.python = b.python = short_python;
  timed = TimeHandoffs({&a, &b}, dir.path.string(), 10);
  REQUIRE(timed.size() == 2);
  CHECK(timed[0].ok());
  CHECK_FALSE(timed[1].ok());
}
