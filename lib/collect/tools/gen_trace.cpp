// gen_trace N out.pb [workers] [rank]: writes a synthetic trace of N spans shaped like
// a real run (main thread: dataloader.wait per iteration and epoch instants;
// each worker: per batch 32 getitem spans, a collate span and a fetch span with
// CPU time and run-queue delay), through TraceWriter and SpanBatchBuilder with
// the drain thread's 64K-span batches. Timings are pseudo-random around
// realistic values; the numbers mean nothing, the shape is what benchmarks need.
// With a rank (>= 0), the main process is that rank of a job (its process
// chunk carries RANK) and the timings are drawn from a seed of its own, so
// one trace per rank makes a job for `stallprof analyze r*.pb`.
#include <fmt/core.h>

#include <cstdlib>
#include <random>
#include <vector>

#include "trace/reader.h"
#include "trace/writer.h"

using namespace stallprof;

int main(int argc, char** argv) {
  if (argc < 3) {
    fmt::print(stderr, "usage: gen_trace N out.pb [workers] [rank]\n");
    return 2;
  }
  const uint64_t total = std::strtoull(argv[1], nullptr, 10);
  const uint32_t workers = argc > 3 ? static_cast<uint32_t>(std::atoi(argv[3])) : 4;
  const int32_t rank = argc > 4 ? std::atoi(argv[4]) : -1;
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
  constexpr uint32_t kBatch = 32;
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
    const uint64_t wait = ready - main_clock + 5'000 + rng() % 5'000;
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
