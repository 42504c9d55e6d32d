// model::SimulateLoader: each expected figure follows by hand from the set
// costs (processor sharing, in-order delivery, prefetch), not from the code.
#include <catch2/catch.hpp>

#include "model/simulate.h"

using namespace stallprof::model;

namespace {
SimConfig Loader(uint32_t workers, double cores, std::vector<BatchCost> costs, uint64_t batches = 400) {
  SimConfig c;
  c.workers = workers;
  c.cores = cores;
  c.costs = std::move(costs);
  c.batches = batches;
  return c;
}
}  // namespace

TEST_CASE("Without workers the main thread fetches, then computes, one after the other") {
  auto c = Loader(0, 1, {{0.010f, 0.005f}}, 10);
  c.compute_cpu_s = 0.020;
  auto r = SimulateLoader(c);
  CHECK(r.seconds == Approx(10 * 0.035));
  CHECK(r.steady_step_s == Approx(0.035));
  CHECK(r.wait_s == Approx(10 * 0.015));
  CHECK(r.job_delay_s == Approx(0).margin(1e-9));  // one thread at a time on one core
}

TEST_CASE("One worker on its own core bounds the step at its CPU per batch") {
  auto c = Loader(1, 2, {{0.030f, 0}});
  c.compute_cpu_s = 0.010;
  CHECK(SimulateLoader(c).steady_step_s == Approx(0.030).epsilon(1e-6));
}

TEST_CASE("A worker pays its loop's serial gap between fetches only when it has the next index") {
  // 1 worker, 10 ms of fetch CPU a batch and a 4 ms gap after each: 14 ms a
  // batch when the worker is the bottleneck.
  auto c = Loader(1, 2, {{0.010f, 0.0f}}, 200);
  c.worker_gap_s = 0.004;
  CHECK(SimulateLoader(c).steady_step_s == Approx(0.014).epsilon(1e-3));
  // A 20 ms step: the worker idles between batches and the gap hides in it.
  c.compute_cpu_s = 0.020;
  CHECK(SimulateLoader(c).steady_step_s == Approx(0.020).epsilon(1e-3));
}

TEST_CASE("A worker and a CPU-bound step sharing one core take the sum of their CPU per batch") {
  auto c = Loader(1, 1, {{0.030f, 0}});
  c.compute_cpu_s = 0.010;
  auto r = SimulateLoader(c);
  CHECK(r.steady_step_s == Approx(0.040).epsilon(1e-6));
  CHECK(r.compute_delay_s > 0);  // the step waited for the core while the worker ran
}

TEST_CASE("The job's busy cores are the CPU its threads ran over the simulated time") {
  // No workers: 10 ms of fetch CPU and 20 ms of step CPU, then 10 ms off CPU
  // (an accelerator): 30 of every 40 ms on one core.
  auto c = Loader(0, 2, {{0.010f, 0}}, 10);
  c.compute_cpu_s = 0.020;
  c.compute_off_s = 0.010;
  auto r = SimulateLoader(c);
  CHECK(r.job_cpu_s == Approx(10 * 0.030));
  CHECK(r.job_cpu_s / r.seconds == Approx(0.75));
  // Three busy workers on 2 cores (each 30 ms of CPU a batch, a free step):
  // both cores busy throughout the steady state, never more.
  auto busy = Loader(3, 2, {{0.030f, 0}}, 300);
  auto b = SimulateLoader(busy);
  CHECK(b.job_cpu_s / b.seconds == Approx(2).epsilon(0.02));
  CHECK(b.job_cpu_s / b.seconds <= 2 + 1e-9);
}

TEST_CASE("Workers blocked off CPU overlap: two of them halve a latency-bound step") {
  auto c = Loader(2, 2, {{0, 0.100f}});
  c.compute_off_s = 0.010;
  CHECK(SimulateLoader(c).steady_step_s == Approx(0.050).epsilon(1e-6));
}

TEST_CASE("A background load takes its share of the cores from the workers") {
  auto c = Loader(1, 1, {{0.010f, 0}});
  c.background_threads = 1;
  CHECK(SimulateLoader(c).steady_step_s == Approx(0.020).epsilon(1e-6));
}

TEST_CASE("Round-robin assignment: the worker with the slow batches sets the pace, not the mean cost") {
  // Even batches (worker 0) take 100 ms off CPU, odd ones (worker 1) 10 ms:
  // worker 1 idles while the main waits for worker 0, so 2 batches per 100 ms,
  // where 2 workers / mean cost (55 ms) would promise one per 27.5 ms.
  for (uint32_t prefetch : {1u, 4u}) {
    auto c = Loader(2, 4, {{0, 0.100f}, {0, 0.010f}});
    c.prefetch_factor = prefetch;
    CHECK(SimulateLoader(c).steady_step_s == Approx(0.050).epsilon(1e-6));
  }
}

TEST_CASE("A multi-threaded step stretches by the share of the cores a busy worker takes") {
  // 20 ms of CPU on 2 threads (10 ms alone on 2 cores); a worker that is always
  // busy makes 3 runnable threads on 2 cores: each gets 2/3, the step 15 ms.
  // The last step runs alone (the worker has nothing left): 10 ms.
  auto c = Loader(1, 2, {{1.0f, 0}}, 20);
  c.compute_cpu_s = 0.020;
  c.compute_threads = 2;
  auto r = SimulateLoader(c);
  CHECK(r.compute_s == Approx(19 * 0.015 + 0.010).epsilon(1e-6));
}

TEST_CASE("A parallel step whose threads must share the cores progresses as one thread at its share") {
  // 10 ms of work on 2 threads (5 ms alone on 2 cores) and 2 workers of 30 ms
  // CPU a batch, always busy. During the step 4 threads share 2 cores, half a
  // core each. Fluid sharing: the cores are never idle, 40 ms of CPU a batch
  // over 2 cores, 20 ms. Held up by each other the step advances at half a
  // thread: 20 ms, in which the workers do 2 x 10 ms of CPU; the last 10 ms of
  // the batch's 30 they do at a core each while the main loop waits, 5 ms.
  auto c = Loader(2, 2, {{0.030f, 0}});
  c.compute_cpu_s = 0.010;
  c.compute_threads = 2;
  CHECK(SimulateLoader(c).steady_step_s == Approx(0.020).epsilon(1e-3));
  c.compute_parallel = true;
  CHECK(SimulateLoader(c).steady_step_s == Approx(0.025).epsilon(1e-3));
  // With the cores to itself (no workers) it runs on both: 5 ms after each 30 ms fetch.
  auto alone = Loader(0, 2, {{0.030f, 0}});
  alone.compute_cpu_s = 0.010;
  alone.compute_threads = 2;
  alone.compute_parallel = true;
  CHECK(SimulateLoader(alone).steady_step_s == Approx(0.035).epsilon(1e-3));
  // Beside 0.1 busy threads of other processes: one thread more a tenth of the
  // time, when the step advances as one thread at 2/3 of a core, and on both
  // cores the rest: 0.9 x 2 + 0.1 x 2/3 = 1.867 cores, 10 ms of work in
  // 5.36 ms. Held up throughout it would take 10.5 ms.
  alone.background_threads = 0.1;
  CHECK(SimulateLoader(alone).steady_step_s == Approx(0.030 + 0.010 / (0.9 * 2 + 0.1 * 2.0 / 3)).epsilon(2e-3));
  // A whole busy thread: held up throughout, a third of the cores each, 15 ms.
  alone.background_threads = 1;
  CHECK(SimulateLoader(alone).steady_step_s == Approx(0.030 / (2.0 / 2.0) + 0.010 / (2.0 / 3)).epsilon(2e-3));
}

TEST_CASE("Worker start-up delays the first batch once") {
  auto c = Loader(1, 2, {{0, 0.010f}}, 10);
  c.startup_s = 1.0;
  auto r = SimulateLoader(c);
  CHECK(r.seconds == Approx(1.0 + 10 * 0.010).epsilon(1e-6));
  CHECK(r.steady_step_s == Approx(0.010).epsilon(1e-6));
}

TEST_CASE("Scales apply to every batch's cost") {
  auto c = Loader(0, 1, {{0.010f, 0.010f}}, 10);
  c.cpu_scale = 0.5;
  c.io_scale = 0;
  CHECK(SimulateLoader(c).steady_step_s == Approx(0.005).epsilon(1e-6));
}

TEST_CASE("Zero batches or zero costs end without hanging") {
  CHECK(SimulateLoader(Loader(2, 2, {{0, 0}}, 0)).seconds == 0);
  CHECK(SimulateLoader(Loader(2, 2, {}, 50)).seconds == Approx(0).margin(1e-9));
  CHECK(SimulateLoader(Loader(0, 1, {}, 50)).seconds == Approx(0).margin(1e-9));
}

TEST_CASE("A stream split unevenly over the workers runs each epoch's end on the workers whose stream lasts") {
  // 2 workers whose streams yield 30 and 15 batches an epoch, 10 ms off CPU
  // each, a 1 ms step, cores to spare. Worker 0 makes 30 batches back to back
  // (300 ms; its prefetch slots stay full once worker 1's stream has ended),
  // the step after its last takes 1 ms, and the next epoch's indices go out
  // only then: 301 ms an epoch of 45 batches. Round robin over both would
  // take 5 ms a batch.
  auto c = Loader(2, 8, {{0.0f, 0.010f}}, 45 * 8);
  c.compute_off_s = 0.001;
  c.worker_quota = {30, 15};
  CHECK(SimulateLoader(c).steady_step_s == Approx(0.301 / 45).epsilon(0.01));
  // analyze's steady window of each epoch: past its first 5 batches and before
  // the last 4 (2 workers x prefetch 2 in flight at its end). Batch 4 is
  // worker 0's third (30 ms into the epoch), batch 40 its 26th (260 ms), each
  // taken with a 1 ms step: 230 ms over the 36 batches between, where the
  // whole epoch's mean holds more of its one-worker end.
  c.steady_skip_first = 5;
  c.steady_skip_last = 4;
  CHECK(SimulateLoader(c).steady_step_s == Approx(0.230 / 36).epsilon(0.01));
  c.worker_quota.clear();
  CHECK(SimulateLoader(c).steady_step_s == Approx(0.005).epsilon(0.01));
  // A worker whose stream is empty gets no index: 3 streams of 15 over 4 workers take 150 ms an epoch.
  auto four = Loader(4, 8, {{0.0f, 0.010f}}, 45 * 8);
  four.compute_off_s = 0.001;
  four.worker_quota = {15, 15, 15, 0};
  CHECK(SimulateLoader(four).steady_step_s == Approx(0.151 / 45).epsilon(0.02));
}

TEST_CASE("Workers with equal costs do not stay in lock step: their CPU bursts spread over the batch") {
  // 8 workers, 5 ms of CPU and 30 ms off CPU a batch, 2 cores, a 1 ms step
  // off CPU. Spread out, the workers want 8 x 5 / 35 = 1.14 cores: no one
  // waits, a batch every 35 / 8 = 4.375 ms, from the first epoch on. Started
  // at once and shared fluidly they would stay in step, every burst shared
  // 8 ways: 8 x 5 / 2 + 30 = 50 ms a round, 6.25 ms a batch.
  auto c = Loader(8, 2, {{0.005f, 0.030f}}, 400);
  c.compute_off_s = 0.001;
  const auto r = SimulateLoader(c);
  CHECK(r.steady_step_s == Approx(0.035 / 8).epsilon(0.01));
  auto epoch = c;
  epoch.batches = 64;  // a short epoch from an empty pipeline: the spread start costs under one batch's production
  CHECK(SimulateLoader(epoch).seconds <= 64 * 0.035 / 8 + 0.035 + 0.002);
}

TEST_CASE("A worker waits for its next index until the main thread has received the batch before") {
  // 1 worker, prefetch 1: one index outstanding. torch sends the next index
  // after receiving a batch (unpickling: 1 ms here), so each batch costs the
  // worker's 5 ms fetch and the main thread's 1 ms receive in turn: 6 ms.
  auto c = Loader(1, 2, {{0.005f, 0.0f}}, 200);
  c.prefetch_factor = 1;
  c.receive_cpu_s = 0.001;
  CHECK(SimulateLoader(c).steady_step_s == Approx(0.006).epsilon(1e-6));
  // Two outstanding: the worker always holds one, and the fetch paces it.
  c.prefetch_factor = 2;
  CHECK(SimulateLoader(c).steady_step_s == Approx(0.005).epsilon(1e-6));
}

TEST_CASE("A fetch holding the GIL keeps its worker's sending thread from sending until it gives the GIL up") {
  // 1 worker on 4 cores, prefetch 2: 4 ms of fetch CPU and 1 ms of loop CPU
  // a batch, 0.4 ms of it the serial gap; a 0.5 ms receive, the step off CPU.
  auto c = Loader(1, 4, {{0.004f, 0.0f}}, 400);
  c.worker_loop_cpu_s = 0.001;
  c.worker_gap_s = 0.0004;
  c.receive_cpu_s = 0.0005;
  // Beside the fetch (the GIL released: C code), the sending overlaps the
  // next fetch, and the worker holds the next index as a fetch ends: the
  // fetch and the gap pace the loader, 4.4 ms.
  CHECK(SimulateLoader(c).steady_step_s == Approx(0.0044).epsilon(1e-6));
  // Holding the GIL, the fetch lets it go only as it ends: the sending
  // thread's serial part (the gap, 0.4 ms) sends the batch then, and the
  // main thread's receiving (0.5 ms), which needs the worker's GIL to be
  // handed the batch's memory, waits for the fetch too. torch sends the next
  // index only after that, so the worker idles meanwhile: 4 + 0.4 + 0.5 =
  // 4.9 ms a batch. The rest of the loop CPU (0.6 ms) runs beside the next
  // fetch, off the GIL. Measured: a 2.7 ms fetch of Python tokenizing, 1.0 ms
  // of loop CPU and 0.5 ms of receiving ran at 3.5 ms a batch (taking all
  // the loop CPU as serial, the model said 4.2).
  c.fetch_holds_gil = true;
  const SimResult held = SimulateLoader(c);
  CHECK(held.steady_step_s == Approx(0.0049).epsilon(1e-3));
  // Waiting for the worker's GIL is waiting for the batch, not receiving it.
  CHECK(held.receive_s == Approx(400 * 0.0005).epsilon(0.01));
  // Every call finds its batch fetched while the worker runs the next fetch:
  // its handoff is the receive once that fetch let the batch go, as analyze
  // measures it where the fetch holds the GIL (PrefetchStats::held_handoff_s).
  CHECK(held.handoff_s == Approx(400 * 0.0005).epsilon(0.01));
  // Every batch's CPU is paid: fetch, all the loop CPU, receive.
  CHECK(held.job_cpu_s == Approx(400 * 0.0055).epsilon(0.01));
  // Without a measured gap the sending takes no serial time: 4.5 ms.
  c.worker_gap_s = 0;
  CHECK(SimulateLoader(c).steady_step_s == Approx(0.0045).epsilon(1e-3));
  // Deeper prefetch does not part them: the worker's GIL is free for the
  // receiving only once the worker has run out of indices. 8 ms of fetch,
  // 0.8 ms of serial gap and 0.5 ms of receiving: 9.3 ms (beside it: 8 ms).
  c.costs = {{0.008f, 0.0f}};
  c.worker_loop_cpu_s = 0.002;
  c.worker_gap_s = 0.0008;
  c.prefetch_factor = 4;
  CHECK(SimulateLoader(c).steady_step_s == Approx(0.0093).epsilon(1e-3));
}

TEST_CASE("A fresh worker pays its set-up on its first fetches only, each worker once") {
  // 2 workers on 2 cores, 10 ms of CPU a batch, no step; the second worker
  // starts half a batch's production (5 ms) after the first (the
  // simulation's stagger): batches 0 and 2 end at 10 and 20 ms, 1 and 3 at
  // 15 and 25.
  auto c = Loader(2, 2, {{0.010f, 0}}, 4);
  CHECK(SimulateLoader(c).seconds == Approx(0.025).epsilon(1e-6));
  // A 100 ms set-up on CPU and 50 ms off it in the first fetch: the first
  // worker's first fetch ends at 160 ms, the second's at 165, the last batch
  // 10 ms later (paid twice by a worker: 335 ms).
  c.worker_setup = {{0.100f, 0.050f}};
  CHECK(SimulateLoader(c).seconds == Approx(0.175).epsilon(1e-6));
  // On one core the two set-ups' CPU shares it: the first worker alone for
  // 5 ms, both at half a core until 215 ms, the second alone to 220; then
  // 50 ms off CPU each (265, 270), and the last batches' 10 ms each, shared
  // from 270 ms: 280 and 285.
  c.cores = 1;
  CHECK(SimulateLoader(c).seconds == Approx(0.285).epsilon(1e-6));
  // 20 ms more in each worker's second fetch: 30 ms after its first (190, 195).
  c.cores = 2;
  c.worker_setup = {{0.100f, 0.050f}, {0.020f, 0}};
  CHECK(SimulateLoader(c).seconds == Approx(0.195).epsilon(1e-6));
}

TEST_CASE("The handoff is the wait in next() for a batch fetched before the call, until it is received") {
  // 1 worker, prefetch 1, on 2 cores: a 1 ms fetch, then 3 ms of sending on
  // the worker's sending thread; the main thread receives in 1 ms and steps
  // 2 ms off CPU. Its index goes out as a receive ends: fetched 1 ms later,
  // so at next() (2 ms later) it is fetched, its worker idle, and next()
  // waits the 2 ms of sending left and the 1 ms receive.
  auto c = Loader(1, 2, {{0.001f, 0.0f}}, 400);
  c.prefetch_factor = 1;
  c.worker_loop_cpu_s = 0.003;
  c.receive_cpu_s = 0.001;
  c.compute_off_s = 0.002;
  auto r = SimulateLoader(c);
  CHECK(r.steady_step_s == Approx(0.005).epsilon(1e-6));  // fetch, send, receive in turn
  CHECK(r.handoff_s == Approx(399 * 0.003).epsilon(1e-6));  // the first batch was not fetched at its call
  // A 0.5 ms step: next() comes before the fetch ends, and no wait is handoff.
  c.compute_off_s = 0.0005;
  CHECK(SimulateLoader(c).handoff_s == Approx(0).margin(1e-12));
}
