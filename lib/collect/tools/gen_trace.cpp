// gen_trace N out.pb [workers] [rank] [--samples-per-batch K] [--spike-at I] [--sampler-ms M]:
// writes a synthetic trace of N spans shaped like a real run (main thread:
// dataloader.wait per iteration and an epoch instant every 1000 iterations;
// each worker: per batch K getitem spans (default 32), a collate span and a
// fetch span with CPU time and run-queue delay), through TraceWriter and
// SpanBatchBuilder with the drain thread's 64K-span batches. Timings are
// pseudo-random around realistic values; the numbers mean nothing, the shape
// is what benchmarks need. --spike-at I: iteration I waits one second more
// (a spike a report must show). --sampler-ms M: machine-wide sampler rows
// every M ms of the run (none by default). With a rank (>= 0), the main
// process is that rank of a job (its process chunk carries RANK) and the
// timings are drawn from a seed of its own, so one trace per rank makes a job
// for `stallprof analyze r*.pb`.
#include <fmt/core.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "trace/reader.h"
#include "trace/writer.h"

using namespace stallprof;

int main(int argc, char** argv) {
  if (argc < 3) {
    fmt::print(stderr,
               "usage: gen_trace N out.pb [workers] [rank] [--samples-per-batch K] [--spike-at I] [--sampler-ms M]\n");
    return 2;
  }
  const uint64_t total = std::strtoull(argv[1], nullptr, 10);
  uint32_t workers = 4, samples_per_batch = 32;
  int32_t rank = -1;
  uint64_t spike_at = UINT64_MAX, sampler_ms = 0;
  for (int i = 3; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (std::strcmp(argv[i], "--samples-per-batch") == 0 && has_value) samples_per_batch = static_cast<uint32_t>(std::atoi(argv[++i]));
    else if (std::strcmp(argv[i], "--spike-at") == 0 && has_value) spike_at = std::strtoull(argv[++i], nullptr, 10);
    else if (std::strcmp(argv[i], "--sampler-ms") == 0 && has_value) sampler_ms = std::strtoull(argv[++i], nullptr, 10);
    else if (i == 3) workers = static_cast<uint32_t>(std::atoi(argv[i]));
    else if (i == 4) rank = std::atoi(argv[i]);
    else {
      fmt::print(stderr, "gen_trace: unknown argument '{}'\n", argv[i]);
      return 2;
    }
  }
  if (workers == 0) workers = 1;
  pb::TraceHeader h;
  h.set_version_major(kTraceVersionMajor);
  h.set_version_minor(kTraceVersionMinor);
  h.set_tool_version("gen_trace");
  h.add_command("gen_trace");
  h.set_usable_cores(8);
  h.set_online_cores(8);
  h.set_start_monotonic_ns(1'000'000'000);
  auto w = TraceWriter::Create(argv[2], h);
  if (!w.ok()) {
    fmt::print(stderr, "gen_trace: error: {}\n", w.error().message);
    return 1;
  }
  auto write = [&](const pb::Chunk& c) {
    if (auto s = (*w)->Write(c); !s.ok()) {
      fmt::print(stderr, "gen_trace: error: {}\n", s.error().message);
      std::exit(1);
    }
  };
  pb::Chunk c;
  auto* strings = c.mutable_strings();
  strings->set_first_id(1);
  for (const char* s : {names::kWait, names::kEpoch, names::kFetch, names::kGetitem, names::kCollate, "MainThread",
                        "pt_data_worker"})
    strings->add_value(s);
  write(c);
  enum : uint32_t { kWaitId = 1, kEpochId, kFetchId, kGetitemId, kCollateId, kMainName, kWorkerName };
  for (uint32_t t = 0; t <= workers; ++t) {
    auto* th = c.mutable_thread();
    th->set_thread_id(t);
    th->set_pid(1000 + t);
    th->set_tid(1000 + t);
    th->set_lane(t);
    th->set_lane_generation(1);
    th->set_name(t == 0 ? kMainName : kWorkerName);
    th->set_client(1);
    write(c);
  }

  if (rank >= 0)
    for (uint32_t t = 0; t <= workers; ++t) {
      auto* p = c.mutable_process();
      p->set_pid(1000 + t);
      p->set_ppid(t == 0 ? 1 : 1000);
      p->set_rank(rank);
      p->set_local_rank(-1);
      p->set_comm(t == 0 ? "python3" : "pt_data_worker");
      write(c);
    }

  std::mt19937_64 rng(rank >= 0 ? 42 + static_cast<uint64_t>(rank) : 42);
  std::vector<SpanBatchBuilder> batches;
  for (uint32_t t = 0; t <= workers; ++t) batches.emplace_back(t);
  auto add = [&](uint32_t thread, const SpanRow& row) {
    batches[thread].Add(row);
    if (batches[thread].size() >= 64 * 1024) {
      batches[thread].TakeInto(c);
      write(c);
    }
  };
  const uint32_t kBatch = samples_per_batch;
  std::vector<uint64_t> worker_clock(workers + 1, 2'000'000'000ull);
  uint64_t main_clock = 2'000'000'000ull, written = 0, batch_index = 0, iteration = 0;
  while (written < total) {
    if (iteration % 1000 == 0) {
      add(0, {.start_ns = main_clock, .name = kEpochId, .arg = iteration / 1000, .scope = 1, .kind = 4});
      ++written;
    }
    // One batch on a round-robin worker: getitems, collate, then the enclosing fetch.
    const uint32_t wk = 1 + static_cast<uint32_t>(batch_index % workers);
    uint64_t t = worker_clock[wk] + 2000 + rng() % 3000;
    const uint64_t fetch_start = t;
    for (uint32_t i = 0; i < kBatch && written < total; ++i) {
      const uint64_t d = 150'000 + rng() % 100'000;
      add(wk, {.start_ns = t, .duration_ns = d, .name = kGetitemId, .arg = rng() % 1'281'167, .scope = 1});
      t += d + 300 + rng() % 700;
      ++written;
    }
    const uint64_t collate = 40'000 + rng() % 20'000;
    add(wk, {.start_ns = t, .duration_ns = collate, .name = kCollateId, .arg = batch_index, .scope = 1});
    t += collate;
    const uint64_t produce = t - fetch_start;
    add(wk, {.start_ns = fetch_start, .duration_ns = produce, .name = kFetchId, .arg = batch_index, .scope = 1,
             .has_cpu = CpuMeasured::kYes, .cpu_ns = produce * 9 / 10 - rng() % 10'000, .delay_ns = rng() % 200'000});
    worker_clock[wk] = t;
    written += 2;
    ++batch_index;
    // The main loop waits for the batch, then computes.
    const uint64_t ready = std::max(main_clock, t);
    const uint64_t wait = ready - main_clock + 5'000 + rng() % 5'000 + (iteration == spike_at ? 1'000'000'000ull : 0);
    add(0, {.start_ns = main_clock, .duration_ns = wait, .name = kWaitId, .arg = iteration % 1000, .scope = 1});
    main_clock += wait + 1'500'000 / workers + rng() % 200'000;
    ++written;
    ++iteration;
  }
  for (auto& b : batches)
    if (!b.empty()) {
      b.TakeInto(c);
      write(c);
    }
  if (sampler_ms > 0) {
    // The machine: 8 cores about 60% busy, the disk reading ~50 MB/s, the page cache growing.
    auto* sys = c.mutable_system_samples();
    uint64_t busy = 0, total_cpu = 0, read = 0, cache = 1ull << 30;
    for (uint64_t t = 2'000'000'000ull; t <= main_clock; t += sampler_ms * 1'000'000) {
      total_cpu += 8 * sampler_ms * 1'000'000;
      busy += (50 + rng() % 20) * 8 * sampler_ms * 10'000;
      read += (40 + rng() % 20) * sampler_ms * 1000;
      cache += rng() % (1 << 20);
      sys->add_t_ns(t);
      sys->add_cpu_busy_ns(busy);
      sys->add_cpu_total_ns(total_cpu);
      sys->add_page_cache_bytes(cache);
      sys->add_disk_read_bytes(read);
      sys->add_mem_available_bytes(8ull << 30);
    }
    write(c);
  }
  auto* f = c.mutable_footer();
  f->set_spans(written);
  f->set_end_monotonic_ns(main_clock);
  write(c);
  if (auto s = (*w)->Close(); !s.ok()) {
    fmt::print(stderr, "gen_trace: error: {}\n", s.error().message);
    return 1;
  }
  fmt::print("gen_trace: {} spans, {} bytes, {:.2f} bytes/span\n", written, (*w)->bytes_written(),
             static_cast<double>((*w)->bytes_written()) / static_cast<double>(written));
  return 0;
}
