// A trace-driven simulation of one DataLoader (docs/model.md "Simulation"):
// W workers each serving its own FIFO of batch indices (batch i goes to
// worker i mod W, as torch's round robin does), at most W x prefetch_factor
// batches sent and not yet consumed, in-order delivery to the main loop, and
// processor sharing of the cores between every runnable thread: the step's
// own threads, the main thread receiving a batch, the workers on CPU, each
// worker's sending thread (the loop CPU: pickling and sending a fetched
// batch, beside the next fetch) and a background load from outside the job. Per-batch worker costs are the
// measured fetch spans, cycled in order, so a long tail and in-order delivery
// act as they did in the run; means would hide both.
//
// Sharing is fluid: with D runnable threads (the step counts as its width)
// on C cores, each runs at min(1, C / D) of a core. CPU work is fixed (CPU
// seconds); a thread's wall time stretches when it gets less than a core.
// Off-CPU time (io, sleeps, an accelerator) never stretches.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace stallprof::model {

// One batch's cost in the thread that fetches it, as measured: CPU seconds
// and seconds off CPU while not runnable (storage, sleeps). Run-queue delay
// is not a cost: the simulation predicts it.
struct BatchCost {
  float cpu_s = 0;
  float io_s = 0;
  double Seconds() const { return static_cast<double>(cpu_s) + io_s; }
};
// Sums over costs (a worker's set-up over its first fetches, say).
inline double SumSeconds(std::span<const BatchCost> costs) {
  double s = 0;
  for (const auto& c : costs) s += c.Seconds();
  return s;
}
inline double SumCpuSeconds(std::span<const BatchCost> costs) {
  double s = 0;
  for (const auto& c : costs) s += c.cpu_s;
  return s;
}

struct SimConfig {
  uint32_t workers = 0;           // 0: the main thread fetches each batch itself, serially
  uint32_t prefetch_factor = 2;
  double cores = 1;
  double background_threads = 0;  // runnable threads from outside the job, on average
  // The step between two next() calls: `compute_cpu_s` of CPU on
  // `compute_threads` threads (>= 1), then `compute_off_s` off CPU.
  double compute_cpu_s = 0;
  double compute_threads = 1;
  double compute_off_s = 0;
  // The step's threads wait for each other at every operator (torch's
  // intra-op threads): a thread that loses its core holds the others up, so
  // while they share the cores the step progresses as one thread at its share
  // (docs/model.md "A parallel step beside workers"), not as its width.
  bool compute_parallel = false;
  // A worker's wall time between a fetch and its next one when it has the
  // next index already: its loop's serial part (off the GIL its sending
  // thread holds while pickling), measured in a profile with workers.
  double worker_gap_s = 0;
  double receive_cpu_s = 0;       // W >= 1: the main thread's CPU to receive one batch (unpickling);
                                  // W = 0: the iterator's own code in next() beside the fetch
  // W >= 1: each batch's CPU in its worker process beyond the fetch (pickling,
  // sending), paid by the worker's own sending thread after the fetch, in
  // parallel with the next fetch (torch's queue feeder thread pickles; the
  // worker loop only hands it the batch).
  double worker_loop_cpu_s = 0;
  // A worker's fetch holds the GIL while on CPU (pure-Python work), so its
  // sending thread sends when the fetch leaves the CPU (ends, or waits on
  // I/O), holding the GIL for the serial gap (worker_gap_s; the rest of the
  // loop CPU runs beside the next fetch, off the GIL: pipe writes, the fds'
  // kernel work), and the main thread's receive of its batch waits while
  // either holds it. False: the sending thread runs beside the fetch (a
  // fetch in C that releases the GIL, e.g. image decoding).
  bool fetch_holds_gil = false;
  // CPU each fetch costs beyond `costs` (not scaled by cpu_scale; a batch's
  // CPU stays at least 0): collating into shared memory, which a worker pays
  // and the main thread does not, added to costs measured without workers
  // and taken out (negative) of costs measured in workers for W = 0.
  double fetch_extra_cpu_s = 0;
  // W >= 1: a fresh worker's set-up, paid in its first fetches beyond those
  // batches' costs (entry k in its fetch k: CPU, then off CPU); empty for
  // workers that persist from an earlier epoch.
  std::vector<BatchCost> worker_setup;
  // An IterableDataset whose stream its own code splits over the workers
  // unevenly (3 shards over 2 workers): the batches each worker's stream
  // yields an epoch. The simulation then runs epochs of their sum: torch deals
  // indices in turn to the workers whose stream has not ended, and sends an
  // epoch's first indices only when the main loop has taken the previous
  // epoch's last batch (a new iterator). Empty: round robin over every worker,
  // no epochs.
  std::vector<uint64_t> worker_quota;
  // With worker_quota, the steady state is each epoch's batches past the
  // first `steady_skip_first` and before the last `steady_skip_last`, as
  // analyze measures it (its --warmup, and the drain: workers x
  // prefetch_factor batches in flight when the stream ended).
  uint32_t steady_skip_first = 0, steady_skip_last = 0;
  std::vector<BatchCost> costs;   // per batch, cycled; empty = no worker cost
  uint64_t cost_offset = 0;       // batch i costs costs[(i + cost_offset) % size]: one epoch's part of a run
  double cpu_scale = 1, io_scale = 1;  // applied to every cost (a cache removes misses)
  uint64_t batches = 0;           // batches the main loop consumes
  double startup_s = 0;           // before the workers can start the first batch (worker start-up)
};

struct SimResult {
  double seconds = 0;             // start to the end of the last step
  double steady_step_s = 0;       // mean step over the middle half of the batches (pipeline full, not draining);
                                  // with worker_quota, over the epochs after the first, each's steady window
  double wait_s = 0;              // the main loop blocked in next() waiting for a batch, in total
  double compute_s = 0;           // wall time of the steps (stretched by sharing), in total
  double receive_s = 0;           // wall time receiving batches, in total
  // W >= 1: the wall time of the next() calls that found their batch fetched
  // and its worker not fetching another (analyze's deliverable batch), from
  // the call to the batch received, in total: the handoff a profile measures.
  // With fetch_holds_gil, also the calls that found their batch fetched while
  // its worker ran a later fetch, from when the receive could go on to its
  // end (analysis PrefetchStats::held_handoff_s).
  double handoff_s = 0;
  double job_delay_s = 0;         // runnable-but-waiting thread-seconds of the job (run-queue delay)
  double job_cpu_s = 0;           // thread-seconds the job's threads ran on a core (its busy cores x time)
  double worker_delay_s = 0;      // of which the workers' (what fetch spans record)
  double compute_delay_s = 0;     // of which the step's
};

// Runs the simulation. Zero batches gives a zero result; costs with W >= 1
// and nothing to fetch are taken as free batches.
SimResult SimulateLoader(const SimConfig& config);

}  // namespace stallprof::model
