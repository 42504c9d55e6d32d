// What handing a batch from a DataLoader worker to the main process costs,
// timed after the job (docs/model.md, inputs `loop`, `receive`, `shm` and
// `touch`): a profile without workers cannot see the worker's pickling and
// sending or the main thread's receiving, and whatif needs both to predict
// workers; a profile with workers cannot take apart from its fetches and steps
// what collating into shared memory and reading and freeing the received
// batch cost beyond a batch in the heap, which a loop without them does not
// pay. The hook leaves one request per loader in a folder (STALLPROF_IPC_DIR:
// pid, scope, the job's Python, its first batch's tensor sizes); the launcher
// runs stallprof.calibrate_ipc in that Python once per distinct batch and
// records the result as the loader's config.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"

namespace stallprof::collect {

struct HandoffRequest {
  pid_t pid = 0;
  uint32_t scope = 0;
  std::string python;           // the job's sys.executable
  std::vector<uint64_t> bytes;  // the first batch's tensor sizes
  // Seconds between the loader's batches in the job (0 = unknown): the timing
  // paces its worker to it, since a thread woken after sleeping costs more
  // than one kept busy (docs/model.md, input `loop`).
  double pace_s = 0;
  // The job's resident bytes as its loader's first batches were made (0 =
  // unknown): the timing grows itself by the difference to time the fork and
  // exit per MiB at about the job's size.
  uint64_t rss_bytes = 0;
  // The loader ran with workers: only the shared-memory costs are wanted (its
  // fork, loop and receive were measured in the job itself).
  bool had_workers = false;
  // The indices the loader's sampler draws a batch (0: batch_size=None; -1:
  // unknown), for a loader with workers: the timing also times the iterator's
  // own code in a next() without workers at it, which that profile cannot
  // tell from receiving.
  int64_t batch_size = -1;
  // How the loader would start workers ("fork", "spawn", "forkserver"; empty:
  // unknown), for a loader without them: a spawn or forkserver worker imports
  // torch afresh, which the forked timing worker does not show, so the timing
  // also starts one that way.
  std::string start_method;
};

struct HandoffTiming {
  double loop_cpu_s = 0;         // the worker process's CPU per batch outside its fetch
  double receive_cpu_s = 0;      // the main thread's CPU per next()
  double receive_wall_s = -1;    // the wall time of a next() that found its batch made; -1: not printed
  double collate_shm_cpu_s = 0;  // the worker's collate into shared memory beyond the same into its heap
  double touch_cpu_s = 0;        // the main thread's first read of a received batch (faulting in its pages)
  double free_cpu_s = -1;        // the main thread's free of a received batch beyond a heap copy's; -1: not printed
  uint32_t batches = 0;
  double pace_s = 0;             // seconds a batch the worker was paced at (0: back to back)
  double startup_s = -1;         // starting the (forked) worker, to its first batch beyond a later one's; -1: not printed
  double shutdown_s = -1;        // joining the worker (_shutdown_workers); -1: not printed
  double rss_bytes = -1;         // the timing process's resident memory as it forked; -1: not printed
  double fork_s_per_mib = -1;    // a fork's cost to the parent per resident MiB; -1: not printed
  double exit_s_per_mib = -1;    // the forked child's exit per resident MiB; -1: not printed
  double next_own_cpu_s = -1;    // the iterator's own code in a next() without workers; -1: not printed
  // A worker started by spawn or forkserver (--start-method): iter() to its
  // first batch beyond a later one's, and its join; -1: not timed.
  double spawn_startup_s = -1, spawn_shutdown_s = -1;
  double forkserver_startup_s = -1, forkserver_shutdown_s = -1;
};

// Parses one request file's text: "pid scope\n<python>\n<bytes> <bytes> ...\n"
// then optional lines "pace_s <seconds>", "rss_bytes <bytes>", "workers <count>"
// and "batch_size <indices>".
Result<HandoffRequest> ParseHandoffRequest(const std::string& text);
// Parses the calibration's output line "loop_cpu_s X receive_cpu_s Y
// collate_shm_cpu_s Z touch_cpu_s T batches N [free_cpu_s V] [receive_wall_s W] [pace_s P]
// [startup_s U] [shutdown_s D] [rss_bytes R] [fork_s_per_mib F] [exit_s_per_mib E]
// [next_own_cpu_s O]" (keys in any order; W = -1: not timed).
Result<HandoffTiming> ParseHandoffTiming(const std::string& output);

// The requests in `dir` (unreadable or malformed files are skipped).
std::vector<HandoffRequest> ReadHandoffRequests(const std::string& dir);

// Times the requests' batches in one run of the first request's Python,
// `python -m stallprof.calibrate_ipc B,B,...@PACE/BATCH_SIZE ...` (torch imported once,
// 1.7-2.3 s a process here; `--no-fork-timing` when every request's loader
// had workers), with `python_dir` as its only PYTHONPATH entry
// (the hook's package, not its bootstrap: nothing is recorded) and no ring,
// killed after `timeout_s` a request. One result per request, in order: its
// line's, or the run's error where it failed or hung.
std::vector<Result<HandoffTiming>> TimeHandoffs(const std::vector<const HandoffRequest*>& requests,
                                                const std::string& python_dir, double timeout_s);

}  // namespace stallprof::collect
