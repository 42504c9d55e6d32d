#include "analysis.h"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>

#include "common/units.h"
#include "ring/stallprof_ring.h"
#include "internal.h"
#include "profile.h"
#include "ranks.h"
#include "sampling.h"

namespace stallprof::analysis {

bool LoaderAnalysis::PartialLastBatch(const Iteration& it) const {
  if (it.epoch >= epochs.size() || it.index_in_epoch + 1 != epochs[it.epoch].iterations) return false;
  const auto per_epoch = static_cast<double>(config.SamplesPerEpoch());
  const double b = config.batch_size, n = epochs[it.epoch].iterations;
  return per_epoch > 0 && b > 0 && n * b > per_epoch && (n - 1) * b < per_epoch;
}

bool LoaderAnalysis::IteratorPerStep() const {
  constexpr size_t kMinEpochs = 3;
  constexpr uint64_t kMaxBatchesPerIterator = 2;
  if (epochs.size() < kMinEpochs || !config.batch_size_known || config.batch_size <= 0) return false;
  if (static_cast<double>(config.SamplesPerEpoch()) / config.batch_size <= kMaxBatchesPerIterator) return false;
  for (const auto& e : epochs)
    if ((e.has_end_call && !e.ended_by_deletion) || e.iterations > kMaxBatchesPerIterator) return false;
  return true;
}

namespace {

constexpr double kNs = 1e-9;
constexpr uint32_t kNoName = std::numeric_limits<uint32_t>::max();

uint32_t NameId(const Trace& trace, const char* name) {
  auto id = trace.FindString(name);
  return id ? *id : kNoName;
}

uint64_t LoaderKey(uint32_t pid, uint16_t scope) { return (uint64_t{pid} << 16) | scope; }

using StageAccumulator = StageTotals;

// Indices into the span table: one per iteration or fetch, millions in a long run.
using SpanIndices = HugeVector<uint32_t>;

// Spans of one loader gathered in the single pass over the span table.
struct LoaderSpans {
  uint32_t pid = 0;
  uint16_t scope = 0;
  std::vector<uint16_t> scopes;  // this and the DataLoader objects merged into it (MergeRecreatedLoaders)
  SpanIndices waits;
  SpanIndices epochs;      // dataloader.epoch spans (or instants)
  SpanIndices kept_epochs; // dataloader.kept_epoch spans: epochs of an iterator made before
  SpanIndices loop_ends;   // dataloader.loop_end spans: a subclass's own __iter__ raised StopIteration
  SpanIndices epoch_ends;  // dataloader.epoch_end spans (or instants)
  SpanIndices shutdowns;   // dataloader.shutdown spans: workers shut down, in or out of an epoch_end
  SpanIndices sampler_firsts;  // dataloader.sampler_first spans: the sampler's first draw of an epoch
  SpanIndices fetches;
  SpanIndices handouts;    // dataloader.handout spans: iterated off the main thread
  uint32_t off_main_thread = 0;  // a trace thread id that called next() off its process's main thread + 1, 0 none
};

// The hook's measurement spans of one thread (names::kReadStorage,
// kReadCalls, kSystemCpu), by start time: each contains the fetch span it
// measured.
struct ThreadReads {
  std::vector<uint32_t> storage, calls, system;  // span indices, in start order
};

// Whether process `pid` is `ancestor` or one of its descendants (a
// DataLoader worker, forked or spawned, of the process that iterates).
bool DescendsFrom(const Trace& trace, uint32_t pid, uint32_t ancestor) {
  for (int depth = 0; depth < 16 && pid != 0; ++depth) {
    if (pid == ancestor) return true;
    const ProcessInfo* process = trace.FindProcess(pid);
    if (!process || process->ppid == pid) return false;
    pid = process->ppid;
  }
  return false;
}

// The configuration of a loader's DataLoader objects (`scopes`, in creation
// order): a later object's setting overrides an earlier one's. Its workers
// record what only the fetching process sees (the "held_" keys, "mapped_"
// in traces before 2026-11-29 evening); the rest
// comes from the loader's own process (a worker's own nested loader may
// reuse a scope number).
LoaderConfig ReadConfig(const Trace& trace, uint32_t pid, std::span<const uint16_t> scopes) {
  // A worker records its parent beside the held_ keys: one that exited
  // before the launcher read its /proc entry has no parent in the trace (a
  // CI run under load lost both workers' records of a memmap dataset).
  const auto child_of = [&](uint32_t worker, uint16_t scope) {
    for (const auto& c : trace.configs)
      if (c.pid == worker && c.scope == scope && c.key == "held_parent" && c.type == ConfigValue::Type::kU64 &&
          c.u64 == pid)
        return true;
    return DescendsFrom(trace, worker, pid);
  };
  LoaderConfig config;
  config.name = "loader" + std::to_string(scopes.front());
  for (const uint16_t scope : scopes)
  for (const auto& c : trace.configs) {
    if (c.scope != scope) continue;
    if (c.pid != pid && !((c.key.starts_with("held_") || c.key.starts_with("mapped_")) && child_of(c.pid, scope))) continue;
    auto number = [&]() -> double {
      switch (c.type) {
        case ConfigValue::Type::kU64: return static_cast<double>(c.u64);
        case ConfigValue::Type::kF64: return c.f64;
        case ConfigValue::Type::kStr: return std::atof(c.str.c_str());
      }
      return 0;
    };
    auto text = [&]() -> std::string {
      switch (c.type) {
        case ConfigValue::Type::kU64: return std::to_string(c.u64);
        case ConfigValue::Type::kF64: return std::to_string(c.f64);
        case ConfigValue::Type::kStr: return c.str;
      }
      return {};
    };
    if (c.key == "name" && !text().empty()) config.name = text();
    else if (c.key == "batch_size" && number() > 0) { config.batch_size = number(); config.batch_size_known = true; }
    else if (c.key == "batch_size_from") config.batch_size_from = text();
    else if (c.key == "num_workers") config.num_workers = static_cast<uint32_t>(number());
    else if (c.key == "prefetch_factor" && number() > 0) config.prefetch_factor = static_cast<uint32_t>(number());
    else if (c.key == "pin_memory_unavailable") config.pin_memory_unavailable = number() != 0;
    else if (c.key == "pin_memory") config.pin_memory = number() != 0 || text() == "True" || text() == "true";
    else if (c.key == "persistent_workers") config.persistent_workers = number() != 0 || text() == "True" || text() == "true";
    else if (c.key == "sampler") config.sampler = text();
    else if (c.key == "sampler_order_repeats") config.sampler_order_repeats = number() != 0;
    else if (c.key == "dataset_len") config.dataset_len = static_cast<uint64_t>(number());
    else if (c.key == "sampler_len") config.sampler_len = static_cast<uint64_t>(number());
    else if (c.key == "dataset_bytes") config.dataset_bytes = static_cast<uint64_t>(number());
    else if (c.key == "held_bytes" || c.key == "mapped_bytes") config.held_bytes = static_cast<uint64_t>(number());
    else if (c.key == "held_files" || c.key == "mapped_files") config.held_files = static_cast<uint32_t>(number());
    else if (c.key == "held_kinds") config.held_kinds = text();
    else if (c.key == "iterator_kept_by") config.iterator_kept_by = text();
    else if (c.key == "multiprocessing_context") config.multiprocessing_context = text();
    else if (c.key == "sharing_strategy") config.sharing_strategy = text();
    else if (c.key == "allocator") config.allocator = text();
    else if (c.key == "worker_init_fn") config.worker_init_fn = text();
    else if (c.key == "batch_tensors") config.batch_tensors = static_cast<uint32_t>(number());
    else if (c.key == "batch_bytes") config.batch_bytes = static_cast<uint64_t>(number());
    else if (c.key == "ipc_loop_cpu_s" && number() >= 0) config.ipc_loop_cpu_s = number();
    else if (c.key == "ipc_receive_cpu_s" && number() >= 0) config.ipc_receive_cpu_s = number();
    else if (c.key == "ipc_receive_wall_s" && number() >= 0) config.ipc_receive_wall_s = number();
    else if (c.key == "ipc_collate_shm_cpu_s" && number() >= 0) config.ipc_collate_shm_cpu_s = number();
    else if (c.key == "ipc_touch_cpu_s" && number() >= 0) config.ipc_touch_cpu_s = number();
    else if (c.key == "ipc_free_cpu_s" && number() >= 0) config.ipc_free_cpu_s = number();
    else if (c.key == "ipc_batches") config.ipc_batches = static_cast<uint32_t>(number());
    else if (c.key == "ipc_pace_s" && number() >= 0) config.ipc_pace_s = number();
    else if (c.key == "ipc_startup_s" && number() >= 0) config.ipc_startup_s = number();
    else if (c.key == "ipc_shutdown_s" && number() >= 0) config.ipc_shutdown_s = number();
    else if (c.key == "ipc_context_startup_s" && number() >= 0) config.ipc_context_startup_s = number();
    else if (c.key == "ipc_context_shutdown_s" && number() >= 0) config.ipc_context_shutdown_s = number();
    else if (c.key == "ipc_rss_bytes" && number() >= 0) config.ipc_rss_bytes = number();
    else if (c.key == "ipc_fork_s_per_mib" && number() >= 0) config.ipc_fork_s_per_mib = number();
    else if (c.key == "ipc_exit_s_per_mib" && number() >= 0) config.ipc_exit_s_per_mib = number();
    else if (c.key == "ipc_next_own_cpu_s" && number() >= 0) config.ipc_next_own_cpu_s = number();
    else if (c.key == "intra_op_threads" && number() >= 0) config.intra_op_threads = static_cast<uint32_t>(number());
    if (c.key.starts_with("mapped_") && config.held_kinds.empty()) config.held_kinds = "memory-mapped";
  }
  if (!config.iterator_kept_by.empty()) config.persistent_workers = true;
  return config;
}

// The loader a fetch span of `thread` with `scope` belongs to: the same
// process, else the nearest ancestor process with that loader, else the only
// loader with that scope. -1 when none.
int FindLoaderOfFetch(const Trace& trace, const std::unordered_map<uint64_t, int>& loader_of_key,
                      const std::unordered_map<uint16_t, int>& only_loader_of_scope, uint32_t pid, uint16_t scope) {
  uint32_t current = pid;
  for (int depth = 0; depth < 16 && current != 0; ++depth) {
    auto it = loader_of_key.find(LoaderKey(current, scope));
    if (it != loader_of_key.end()) return it->second;
    const ProcessInfo* process = trace.FindProcess(current);
    if (!process || process->ppid == current) break;
    current = process->ppid;
  }
  auto it = only_loader_of_scope.find(scope);
  return it == only_loader_of_scope.end() ? -1 : it->second;
}

// The difference of a cumulative series between two instants.
double SeriesDelta(const std::vector<uint64_t>& t, const std::vector<uint64_t>& v, uint64_t from, uint64_t to) {
  return internal::SeriesAt(t, v, to) - internal::SeriesAt(t, v, from);
}

// A loader's wait spans in start order: `waits` itself when it is in order
// (the spans of one thread come in the order the thread finished them, and a
// thread's next() calls do not overlap), else a sorted copy in `sorted`.
std::span<const uint32_t> WaitsByStart(const SpanTable& s, const SpanIndices& waits, SpanIndices& sorted) {
  auto by_start = [&](uint32_t a, uint32_t b) { return s.start_ns[a] < s.start_ns[b]; };
  if (std::is_sorted(waits.begin(), waits.end(), by_start)) return waits;
  sorted = waits;
  std::sort(sorted.begin(), sorted.end(), by_start);
  return sorted;
}

// A loader's epoch starts (its iter() calls, a kept iterator's too),
// ascending: where the counter estimates' strata are cut.
std::vector<uint64_t> EpochStarts(const SpanTable& s, const LoaderSpans& l) {
  std::vector<uint64_t> out;
  out.reserve(l.epochs.size() + l.kept_epochs.size());
  for (const SpanIndices* of : {&l.epochs, &l.kept_epochs})
    for (uint32_t e : *of) out.push_back(s.start_ns[e]);
  std::sort(out.begin(), out.end());
  return out;
}

// One DataLoader.__iter__ call as the hook recorded it.
struct EpochMark {
  uint64_t start = 0, ready = 0;  // __iter__ called, returned (equal for an old trace's instant)
  uint32_t number = 0;
  bool kept = false;              // a kept_epoch: no iterator made (EpochStats::iterator_start_ns)
  bool operator<(const EpochMark& o) const { return start < o.start; }
};

// A loop that creates its DataLoader anew under the same name (each epoch of
// a curriculum, each evaluation of a trainer) iterates one loader, not many:
// objects of one process with the same recorded name, batch size and workers,
// each iterated after the previous one's last next(), merge into the first.
// Objects without a telling variable name are named by the line that built
// them ("train.py:42"), so `for x in DataLoader(...)` in an epoch loop merges
// too; only objects without even that ("loader<n>") never merge.
void MergeRecreatedLoaders(const Trace& trace, std::vector<LoaderSpans>& loaders) {
  const auto& s = trace.spans;
  struct Identity {
    uint32_t pid;
    std::string name;
    double batch_size;
    uint32_t num_workers;
    bool operator==(const Identity&) const = default;
  };
  auto first_start = [&](const LoaderSpans& l) {
    uint64_t t = UINT64_MAX;
    for (uint32_t i : l.waits) t = std::min(t, s.start_ns[i]);
    for (uint32_t i : l.epochs) t = std::min(t, s.start_ns[i]);
    return t;
  };
  auto last_end = [&](const LoaderSpans& l) {
    uint64_t t = 0;
    for (const auto* v : {&l.waits, &l.epoch_ends})
      for (uint32_t i : *v) t = std::max(t, s.start_ns[i] + s.duration_ns[i]);
    return t;
  };
  std::vector<size_t> order(loaders.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::vector<uint64_t> starts(loaders.size());
  for (size_t i = 0; i < loaders.size(); ++i) starts[i] = first_start(loaders[i]);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return starts[a] < starts[b]; });
  std::vector<Identity> identity;
  for (const auto& l : loaders) {
    const LoaderConfig c = ReadConfig(trace, l.pid, l.scopes);
    identity.push_back({l.pid, c.name, c.batch_size, c.num_workers});
  }
  std::vector<bool> merged(loaders.size(), false);
  std::vector<uint64_t> ends(loaders.size());
  for (size_t i = 0; i < loaders.size(); ++i) ends[i] = last_end(loaders[i]);
  for (size_t a = 0; a < order.size(); ++a) {
    const size_t into = order[a];
    if (merged[into]) continue;
    for (size_t b = a + 1; b < order.size(); ++b) {
      const size_t from = order[b];
      if (merged[from] || identity[from] != identity[into] || starts[from] < ends[into]) continue;
      LoaderSpans& target = loaders[into];
      LoaderSpans& source = loaders[from];
      for (auto [to, v] : {std::pair{&target.waits, &source.waits}, std::pair{&target.epochs, &source.epochs},
                           std::pair{&target.kept_epochs, &source.kept_epochs},
                           std::pair{&target.loop_ends, &source.loop_ends},
                           std::pair{&target.epoch_ends, &source.epoch_ends}, std::pair{&target.shutdowns, &source.shutdowns},
                           std::pair{&target.handouts, &source.handouts}, std::pair{&target.sampler_firsts, &source.sampler_firsts}})
        to->insert(to->end(), v->begin(), v->end());
      if (target.off_main_thread == 0) target.off_main_thread = source.off_main_thread;
      target.scopes.push_back(source.scope);
      ends[into] = std::max(ends[into], ends[from]);
      merged[from] = true;
    }
  }
  std::vector<LoaderSpans> kept;
  for (size_t i = 0; i < loaders.size(); ++i)
    if (!merged[i]) kept.push_back(std::move(loaders[i]));
  loaders = std::move(kept);
}

// Loaders of one process left with one name after the merge (two loaders
// built on one line and iterated together, `zip(DataLoader(a),
// DataLoader(b))`, share their creation site) are told apart by a suffix in
// the order of their first iteration: "train.py:9", "train.py:9#2". Names
// identify loaders across ranks and select them (--loader), so they must be
// unique. `loaders` is sorted by process, then first scope.
void NameApartSameNamedLoaders(std::vector<LoaderAnalysis>& loaders) {
  std::map<std::pair<uint32_t, std::string>, int> seen;
  for (auto& l : loaders) {
    const int n = ++seen[{l.pid, l.config.name}];
    if (n > 1) l.config.name += "#" + std::to_string(n);
  }
}

// Where an epoch's end is taken from a call after its last return (an
// iterator's deletion, the next iter()): that call comes within a few steps'
// compute of the loader (`median`, at least 1 ms), not after other work or
// an iterator kept to the exit.
bool ComesSoon(uint64_t gap_ns, uint64_t median_ns) { return gap_ns <= std::max<uint64_t>(3 * median_ns, 1'000'000); }

// Under a quarter of the median compute: no step (a batch taken and dropped,
// a prefetcher's moment between two next() calls).
bool NextToNothing(uint64_t gap_ns, uint64_t median_ns) { return 4 * gap_ns < median_ns; }

// A loop that reads a batch ahead (a prefetcher wrapper: apex's
// data_prefetcher, timm's PrefetchLoader) asks for batch 1 as batch 0
// returns, steps on batch i while batch i + 1 is fetched, and meets the
// StopIteration before its last batch's step: each epoch's first compute is
// next to nothing and its last step lies after the epoch's end. Taken so
// where every epoch that ran to its StopIteration with 2 or more batches (2
// epochs at least) has a first compute under a quarter of the median of its
// others, and none of its others is (a loop taking 2 batches a step has
// every other compute next to nothing). That last step then runs to the next
// iter(), when that comes within 3 x that median (else, and in the run's last
// epoch, it is not seen: that batch is unstepped). Each batch's compute is
// then the one measured after the next batch's return (the first also keeps
// the prefetcher's own moment before asking for batch 1), so the per-batch
// figures and the model's draws are steps; the account's totals are the same
// either way. A 2-batch epoch with a 100 ms step read a 50 ms compute and
// 1098 samples/s where the script measured 768.
void FollowReadAhead(const std::vector<EpochMark>& epochs, std::vector<EpochStats>& all_epochs, LoaderAnalysis& loader) {
  auto& its = loader.iterations;
  std::vector<size_t> first_of(all_epochs.size(), SIZE_MAX), last_of(all_epochs.size(), SIZE_MAX);
  for (size_t i = 0; i < its.size(); ++i) {
    if (first_of[its[i].epoch] == SIZE_MAX) first_of[its[i].epoch] = i;
    last_of[its[i].epoch] = i;
  }
  const auto compute_ns = [&](size_t i) { return its[i].compute_end_ns - its[i].return_ns; };
  std::vector<uint64_t> median_rest(all_epochs.size(), 0);  // 0: not an epoch of the test
  size_t eligible = 0, ahead = 0;
  for (size_t e = 0; e < all_epochs.size(); ++e) {
    const EpochStats& epoch = all_epochs[e];
    if (epochs[e].kept || !epoch.has_end_call || epoch.ended_by_deletion || first_of[e] == SIZE_MAX ||
        last_of[e] == first_of[e])
      continue;
    std::vector<uint64_t> rest;
    for (size_t i = first_of[e] + 1; i <= last_of[e]; ++i) rest.push_back(compute_ns(i));
    std::nth_element(rest.begin(), rest.begin() + rest.size() / 2, rest.end());
    median_rest[e] = rest[rest.size() / 2];
    eligible++;
    ahead += NextToNothing(compute_ns(first_of[e]), median_rest[e]) &&
             !NextToNothing(*std::min_element(rest.begin(), rest.end()), median_rest[e]);
  }
  loader.reads_ahead = eligible >= 2 && ahead == eligible;
  if (!loader.reads_ahead) return;
  for (size_t e = 0; e < all_epochs.size(); ++e) {
    if (median_rest[e] == 0) continue;
    EpochStats& epoch = all_epochs[e];
    const uint64_t next_iter = e + 1 < epochs.size() ? epochs[e + 1].start : 0;
    const bool tail_seen =
        next_iter > epoch.end_ns && ComesSoon(next_iter - epoch.end_ns, median_rest[e]);
    if (tail_seen) epoch.step_after_end_ns = next_iter - epoch.end_ns;
    const double before_second = its[first_of[e]].compute_s;
    for (size_t i = first_of[e]; i < last_of[e]; ++i) its[i].compute_s = its[i + 1].compute_s;
    its[first_of[e]].compute_s += before_second;
    its[last_of[e]].compute_s = tail_seen ? epoch.step_after_end_ns * kNs : 0;
    its[last_of[e]].compute_unknown = !tail_seen;
    for (size_t i = first_of[e]; i <= last_of[e]; ++i) its[i].step_s = its[i].wait_s + its[i].compute_s;
  }
}

// `waits`: the loader's wait spans in start order (WaitsByStart).
void BuildIterations(const Trace& trace, const LoaderSpans& spans, std::span<const uint32_t> waits,
                     const CounterEstimator& wait_counters, uint32_t warmup, LoaderAnalysis& loader) {
  const auto& s = trace.spans;
  std::vector<EpochMark> epochs;
  for (uint32_t e : spans.epochs) epochs.push_back({s.start_ns[e], s.start_ns[e] + s.duration_ns[e], static_cast<uint32_t>(s.arg[e])});
  for (uint32_t e : spans.kept_epochs) epochs.push_back({s.start_ns[e], s.start_ns[e], static_cast<uint32_t>(s.arg[e]), true});
  std::stable_sort(epochs.begin(), epochs.end());
  // An iterator made in the DataLoader's constructor (InfiniteDataLoader's)
  // makes an epoch mark of its own before the loop's first kept one: it
  // holds no batch and goes below, and the loop's epochs keep their numbers.
  // Each DataLoader object counts its epochs from 0: a loader re-created
  // under its name numbers them in order instead.
  if (spans.scopes.size() > 1)
    for (size_t e = 0; e < epochs.size(); ++e) epochs[e].number = static_cast<uint32_t>(e);
  // The next() calls that raised StopIteration: (called, returned).
  std::vector<std::pair<uint64_t, uint64_t>> ends;
  for (uint32_t e : spans.epoch_ends) ends.emplace_back(s.start_ns[e], s.start_ns[e] + s.duration_ns[e]);
  std::sort(ends.begin(), ends.end());
  // An iterator left early deleted, its workers (if any) shut down: (called, returned).
  std::vector<std::pair<uint64_t, uint64_t>> shutdowns;
  for (uint32_t e : spans.shutdowns) shutdowns.emplace_back(s.start_ns[e], s.start_ns[e] + s.duration_ns[e]);
  std::sort(shutdowns.begin(), shutdowns.end());
  // Iterations before any epoch mark (a client that records no epochs)
  // form an epoch of their own starting at the first next().
  if (!waits.empty() && (epochs.empty() || s.start_ns[waits.front()] < epochs.front().start))
    epochs.insert(epochs.begin(), {s.start_ns[waits.front()], s.start_ns[waits.front()], epochs.empty() ? 0u : epochs.front().number});

  std::vector<EpochStats> all_epochs(epochs.size());
  for (size_t e = 0; e < epochs.size(); ++e) {
    all_epochs[e].index = epochs[e].number;
    all_epochs[e].start_ns = epochs[e].start;
    all_epochs[e].iterator_ready_ns = epochs[e].ready;
    all_epochs[e].end_ns = epochs[e].ready;
    all_epochs[e].iterator_start_ns = epochs[e].kept && e > 0 ? all_epochs[e - 1].iterator_start_ns : epochs[e].start;
  }
  // The sampler's first draw of each epoch: in the epoch it follows the start of.
  for (uint32_t i : spans.sampler_firsts) {
    const uint64_t at = s.start_ns[i];
    auto after = std::upper_bound(epochs.begin(), epochs.end(), at, [](uint64_t t, const EpochMark& e) { return t < e.start; });
    if (after == epochs.begin()) continue;
    EpochStats& epoch = all_epochs[static_cast<size_t>(std::prev(after) - epochs.begin())];
    if (epoch.sampler_first_ns == 0) epoch.sampler_first_ns = at;
    epoch.sampler_first_s += s.duration_ns[i] * kNs;
  }
  size_t epoch = 0;
  uint32_t index_in_epoch = 0;
  loader.iterations.reserve(waits.size());
  for (uint32_t w : waits) {
    uint64_t start = s.start_ns[w];
    size_t e = epoch;
    while (e + 1 < epochs.size() && epochs[e + 1].start <= start) ++e;
    if (e != epoch || loader.iterations.empty()) {
      index_in_epoch = 0;
      epoch = e;
    }
    Iteration it;
    it.epoch = static_cast<uint32_t>(epoch);
    it.index_in_epoch = index_in_epoch++;
    it.batch_index = epochs[epoch].kept ? static_cast<uint32_t>(s.arg[w]) : it.index_in_epoch;
    it.wait_start_ns = start;
    it.return_ns = start + s.duration_ns[w];
    it.compute_end_ns = it.return_ns;
    it.wait_s = s.duration_ns[w] * kNs;
    it.steady = it.index_in_epoch >= warmup;
    if (const SpanCounters c = wait_counters.At(w); c.known) {
      it.receive_s = static_cast<float>((c.cpu_ns + c.delay_ns) * kNs);
      it.receive_delay_s = static_cast<float>(c.delay_ns * kNs);
    }
    // The previous batch's compute ends at this next() call.
    if (!loader.iterations.empty() && loader.iterations.back().epoch == it.epoch) loader.iterations.back().compute_end_ns = start;
    all_epochs[epoch].iterations++;
    all_epochs[epoch].end_ns = std::max(all_epochs[epoch].end_ns, it.return_ns);
    loader.iterations.push_back(it);
  }
  // The median compute of the batches followed by another next(): how soon
  // an iterator left early is deleted to count as the loop's end (below).
  std::vector<uint64_t> computes;
  computes.reserve(loader.iterations.size());
  for (size_t i = 0; i + 1 < loader.iterations.size(); ++i)
    if (loader.iterations[i + 1].epoch == loader.iterations[i].epoch)
      computes.push_back(loader.iterations[i].compute_end_ns - loader.iterations[i].return_ns);
  uint64_t median_compute = 0;
  if (!computes.empty()) {
    std::nth_element(computes.begin(), computes.begin() + computes.size() / 2, computes.end());
    median_compute = computes[computes.size() / 2];
  }
  // The last batch of each epoch computes until the next() that raised
  // StopIteration (the first one after its return, before the next epoch).
  // A loop left early (for ... break, islice) has no such call: its
  // iterator's deletion (shutting the workers down; an instant without
  // workers) ends it instead, when that comes within a few steps' compute
  // (not an iterator kept to the exit).
  for (size_t i = 0; i < loader.iterations.size(); ++i) {
    auto& it = loader.iterations[i];
    const bool last_of_epoch = i + 1 == loader.iterations.size() || loader.iterations[i + 1].epoch != it.epoch;
    if (!last_of_epoch) continue;
    const uint64_t next_epoch = it.epoch + 1 < epochs.size() ? epochs[it.epoch + 1].start : UINT64_MAX;
    auto end = std::lower_bound(ends.begin(), ends.end(), std::make_pair(it.return_ns, uint64_t{0}));
    auto& epoch_stats = all_epochs[it.epoch];
    if (end != ends.end() && end->first <= next_epoch) {
      it.compute_end_ns = end->first;
      epoch_stats.has_end_call = true;
      epoch_stats.end_call_ns = end->first;
      epoch_stats.end_ns = std::max(epoch_stats.end_ns, end->second);
    } else if (auto down = std::lower_bound(shutdowns.begin(), shutdowns.end(), std::make_pair(it.return_ns, uint64_t{0}));
               down != shutdowns.end() && down->first <= next_epoch &&
               ComesSoon(down->first - it.return_ns, median_compute)) {
      it.compute_end_ns = down->first;
      epoch_stats.has_end_call = true;
      epoch_stats.ended_by_deletion = true;
      epoch_stats.end_call_ns = down->first;
      epoch_stats.end_ns = std::max(epoch_stats.end_ns, down->second);
      // Deleted as it was taken (`if i >= n: break` before the step): the
      // batch was dropped, not trained on; no step, no samples.
      if (NextToNothing(down->first - it.return_ns, median_compute)) it.compute_unknown = true;
    } else if (loader.config.persistent_workers && loader.config.num_workers > 0 && next_epoch != UINT64_MAX &&
               !epochs[it.epoch + 1].kept && next_epoch >= it.return_ns &&
               ComesSoon(next_epoch - it.return_ns, median_compute)) {
      // Persistent workers: the loader keeps its iterator, so a loop left
      // early deletes nothing, and the next iter() (resetting it) ends the
      // last step when it comes soon; dropped as above when at once.
      it.compute_end_ns = next_epoch;
      epoch_stats.end_ns = std::max(epoch_stats.end_ns, next_epoch);
      if (NextToNothing(next_epoch - it.return_ns, median_compute)) it.compute_unknown = true;
    } else {
      it.compute_unknown = true;  // the loop was left early: the epoch ends at the last return
    }
  }
  for (auto& it : loader.iterations) {
    it.compute_s = (it.compute_end_ns - it.return_ns) * kNs;
    it.step_s = it.wait_s + it.compute_s;
  }
  // A subclass's own __iter__ reading a batch ahead (accelerate's
  // DataLoaderShard) ends its iterator inside the next() that returns the
  // last batch: that batch's step runs on to the loop's own StopIteration
  // (names::kLoopEnd), after the epoch_end (EpochStats::step_after_end_ns).
  std::vector<uint64_t> loop_ends;
  for (uint32_t e : spans.loop_ends) loop_ends.push_back(s.start_ns[e]);
  std::sort(loop_ends.begin(), loop_ends.end());
  if (!loop_ends.empty())
    for (size_t i = 0; i < loader.iterations.size(); ++i) {
      auto& it = loader.iterations[i];
      if (i + 1 < loader.iterations.size() && loader.iterations[i + 1].epoch == it.epoch) continue;
      auto& epoch_stats = all_epochs[it.epoch];
      if (!epoch_stats.has_end_call || epoch_stats.ended_by_deletion) continue;
      const uint64_t next_epoch = it.epoch + 1 < epochs.size() ? epochs[it.epoch + 1].start : UINT64_MAX;
      auto loop_end = std::upper_bound(loop_ends.begin(), loop_ends.end(), epoch_stats.end_ns);
      if (loop_end == loop_ends.end() || *loop_end > next_epoch) continue;
      epoch_stats.step_after_end_ns = *loop_end - epoch_stats.end_ns;
      it.compute_s += epoch_stats.step_after_end_ns * kNs;
      it.step_s = it.wait_s + it.compute_s;
    }
  // A wrapper reading ahead that is no DataLoader leaves no loop_end: its epochs' waits tell.
  if (loop_ends.empty()) FollowReadAhead(epochs, all_epochs, loader);
  // Keep only epochs that were iterated, renumbering the iterations' epochs.
  std::vector<uint32_t> remap(all_epochs.size(), 0);
  for (size_t e = 0; e < all_epochs.size(); ++e) {
    if (all_epochs[e].iterations == 0) continue;
    remap[e] = static_cast<uint32_t>(loader.epochs.size());
    loader.epochs.push_back(all_epochs[e]);
  }
  for (auto& it : loader.iterations) it.epoch = remap[it.epoch];
  // next(iter(loader)): each iterator's last batch computes up to the next
  // iterator's creation. A temporary iterator is deleted as next() returns,
  // its workers shutting down before the step (EpochStats::step_after_end_ns);
  // persistent workers' iterator is reset by the next iter() instead.
  if (loader.IteratorPerStep())
    for (size_t i = 0; i + 1 < loader.iterations.size(); ++i) {
      auto& it = loader.iterations[i];
      if (loader.iterations[i + 1].epoch == it.epoch) continue;
      auto& epoch = loader.epochs[it.epoch];
      const uint64_t next_start = loader.epochs[loader.iterations[i + 1].epoch].start_ns;
      if (epoch.ended_by_deletion && next_start > epoch.end_ns) {
        epoch.step_after_end_ns = next_start - epoch.end_ns;
        it.compute_s += epoch.step_after_end_ns * kNs;
      } else if (!epoch.has_end_call && it.compute_unknown && next_start >= it.return_ns) {
        it.compute_unknown = false;
        it.compute_end_ns = next_start;
        it.compute_s = (it.compute_end_ns - it.return_ns) * kNs;
        epoch.end_ns = std::max(epoch.end_ns, next_start);
      }
      it.step_s = it.wait_s + it.compute_s;
    }
  // An epoch's last num_workers x prefetch_factor batches were in flight when
  // the sampler ran out: no batch queues behind them, and they come out as
  // the workers drain (faster where each batch waited on the next fetch to be
  // sent, its lag taken at the epoch's first batch; slower as workers run
  // out of work). They are not the steady state: a 9-batch epoch of one
  // worker read 1045 samples/s in its tail where the job ran at 790-850.
  // A kept iterator's sampler repeats: its epochs end with the queue full.
  const bool kept = !loader.config.iterator_kept_by.empty();
  loader.drain_iterations = kept ? 0 : loader.config.num_workers * loader.config.prefetch_factor;
  for (auto& it : loader.iterations)
    if (it.index_in_epoch + loader.drain_iterations >= loader.epochs[it.epoch].iterations) it.steady = false;
}

// A loader whose whole epochs ran inside one compute of another loader on the
// same thread (a validation pass every N training steps) is not that loader's
// step: its time leaves the compute, step and epoch times of the outer loader
// (Iteration::nested_s), as a validation pass between epochs is outside them.
// A loader zipped with another runs across many of its computes, none whole:
// its next() calls stay in the other's computes (the step waits for them) and
// are summed per loader (LoaderAnalysis::zipped_loaders), so that the account
// can say which part of "compute" was waiting for the other's data.
// `built[i]` holds loader i's iterations and epochs.
void TakeOutNestedLoaders(const Trace& trace, const std::vector<LoaderSpans>& spans, std::vector<LoaderAnalysis>& built) {
  const auto& s = trace.spans;
  auto thread_of = [&](size_t i) { return spans[i].waits.empty() ? UINT32_MAX : s.thread[spans[i].waits.front()]; };
  for (size_t i = 0; i < built.size(); ++i) {
    LoaderAnalysis& outer = built[i];
    struct Run {
      uint64_t start, end;
      size_t loader;
    };
    std::vector<Run> runs;   // other loaders' epochs on this loader's thread
    std::vector<Run> waits;  // and their next() calls
    for (size_t j = 0; j < built.size(); ++j)
      if (j != i && built[j].pid == outer.pid && thread_of(j) == thread_of(i)) {
        for (const EpochStats& e : built[j].epochs) runs.push_back({e.start_ns, e.end_ns, j});
        for (const Iteration& w : built[j].iterations) waits.push_back({w.wait_start_ns, w.return_ns, j});
      }
    if (runs.empty()) continue;
    const auto by_start = [](const Run& a, const Run& b) { return a.start < b.start; };
    std::sort(runs.begin(), runs.end(), by_start);
    std::sort(waits.begin(), waits.end(), by_start);
    std::map<size_t, NestedLoader> nested;
    std::map<size_t, ZippedLoader> zipped;
    std::vector<Run> inside_runs;
    size_t r = 0, w = 0;
    for (Iteration& it : outer.iterations) {
      while (r < runs.size() && runs[r].start < it.return_ns) ++r;
      uint64_t inside = 0;
      inside_runs.clear();
      for (size_t k = r; k < runs.size() && runs[k].start < it.compute_end_ns; ++k)
        if (runs[k].end <= it.compute_end_ns) {
          inside += runs[k].end - runs[k].start;
          inside_runs.push_back(runs[k]);
          NestedLoader& n = nested[runs[k].loader];
          n.runs++;
          n.seconds += (runs[k].end - runs[k].start) * kNs;
        }
      while (w < waits.size() && waits[w].start < it.return_ns) ++w;
      for (size_t k = w; k < waits.size() && waits[k].start < it.compute_end_ns; ++k) {
        const Run& wait = waits[k];
        const bool in_nested = std::any_of(inside_runs.begin(), inside_runs.end(), [&](const Run& n) {
          return n.loader == wait.loader && n.start <= wait.start && wait.start <= n.end;
        });
        if (in_nested) continue;
        const double seconds = (std::min(wait.end, it.compute_end_ns) - wait.start) * kNs;
        ZippedLoader& z = zipped[wait.loader];
        z.seconds += seconds;
        if (it.steady) z.steady_seconds += seconds;
      }
      if (inside == 0) continue;
      it.nested_s = static_cast<float>(inside * kNs);
      it.compute_s -= inside * kNs;
      it.step_s -= inside * kNs;
      outer.epochs[it.epoch].nested_s += inside * kNs;
    }
    for (auto& [j, n] : nested) {
      n.name = built[j].config.name;
      outer.nested_loaders.push_back(n);
    }
    for (auto& [j, z] : zipped) {
      z.name = built[j].config.name;
      outer.zipped_loaders.push_back(z);
    }
  }
}

// What the step uses of the main process (LoaderAnalysis::main_step_*): its
// threads' CPU and run-queue delay over the steps after each epoch's first
// (the first waits for the workers to start), less what its main thread spent in
// next() (wait spans with CPU). The sampler's cumulative series are
// interpolated at the step boundaries; steps tile the epoch, so their sum is
// the series' change over the epoch less the first step. Where every epoch
// has one step (an evaluation loader of one batch), the first steps' compute
// alone is measured instead, from next()'s return to the following call.
void MeasureMainStep(const Trace& trace, std::span<const uint32_t> waits, const CounterEstimator& wait_counters,
                     LoaderAnalysis& loader) {
  const ProcessSeries* series = nullptr;
  for (const auto& p : trace.process_series)
    if (p.pid == loader.pid && p.t_ns.size() >= 2 && p.cpu_ns.size() == p.t_ns.size() &&
        p.delay_ns.size() == p.t_ns.size())
      series = &p;
  if (!series) return;
  // Iterations were built from the waits in start order, one each.
  if (waits.size() != loader.iterations.size()) return;
  const bool with_io = series->read_bytes.size() == series->t_ns.size() && series->rchar.size() == series->t_ns.size();
  // The main thread's own series, where the loader's next() calls run on it.
  const bool with_main_thread =
      series->main_thread_cpu_ns.size() == series->t_ns.size() &&
      series->main_thread_delay_ns.size() == series->t_ns.size() &&
      std::all_of(waits.begin(), waits.end(), [&](uint32_t w) { return trace.threads[trace.spans.thread[w]].IsMain(); });
  double cpu = 0, delay = 0, compute = 0, read = 0, read_calls = 0, main_cpu = 0, main_delay = 0;
  for (const bool firsts : {false, true}) {
    for (size_t i = 0; i < waits.size(); ++i) {
      const Iteration& it = loader.iterations[i];
      const uint64_t from = firsts ? it.return_ns : it.wait_start_ns;
      if ((it.index_in_epoch == 0) != firsts || it.compute_unknown || it.nested_s > 0 || from < series->t_ns.front() ||
          it.compute_end_ns > series->t_ns.back())
        continue;
      // The part of the step after its epoch's end, in its compute_s
      // (EpochStats::step_after_end_ns): an iterator per step's step runs
      // after its workers shut down, a batch-ahead loop's last after the
      // iterator's end. Without it, next(iter(loader))'s steps read as off CPU.
      uint64_t after_from = 0, after_to = 0;
      if (const auto& epoch = loader.epochs[it.epoch];
          epoch.step_after_end_ns > 0 && (i + 1 == waits.size() || loader.iterations[i + 1].epoch != it.epoch)) {
        after_from = epoch.end_ns;
        after_to = epoch.end_ns + epoch.step_after_end_ns;
        if (after_to > series->t_ns.back()) continue;
      }
      SpanCounters in_next;  // zero: a first step's interval leaves next() out
      if (!firsts) {
        in_next = wait_counters.At(waits[i]);
        if (!in_next.known) return;  // the wait's own CPU is unknown: cannot take it out
      }
      const auto delta = [&](const std::vector<uint64_t>& v) {
        return SeriesDelta(series->t_ns, v, from, it.compute_end_ns) + SeriesDelta(series->t_ns, v, after_from, after_to);
      };
      cpu += delta(series->cpu_ns) * kNs - in_next.cpu_ns * kNs;
      delay += delta(series->delay_ns) * kNs - in_next.delay_ns * kNs;
      if (with_main_thread) {
        // As the process's, over whole iterations less next()'s own: over the
        // steps alone the interpolation gives the thread's mean rate (209 us
        // of a fast loader's 251 us steps, next()'s waits spread into them).
        main_cpu += delta(series->main_thread_cpu_ns) * kNs - in_next.cpu_ns * kNs;
        main_delay += delta(series->main_thread_delay_ns) * kNs - in_next.delay_ns * kNs;
      }
      if (with_io) {
        read += delta(series->read_bytes);
        read_calls += delta(series->rchar);
      }
      compute += it.compute_s;
    }
    if (compute > 0) break;
  }
  if (compute <= 0) return;
  loader.main_step_cpu_s = std::max(0.0, cpu);
  loader.main_step_delay_s = std::max(0.0, delay);
  loader.main_step_compute_s = compute;
  if (with_main_thread) {
    // The process's CPU is read in clock ticks, the thread's in ns: over short
    // runs the thread's share may come out above the whole.
    loader.main_thread_step_cpu_s = std::clamp(main_cpu, 0.0, loader.main_step_cpu_s);
    loader.main_thread_step_delay_s = std::clamp(main_delay, 0.0, loader.main_step_delay_s);
  }
  // With workers the process's device reads are its own (without, its fetches' too).
  loader.main_step_read_bytes = loader.config.num_workers > 0 ? read : -1;
  loader.main_step_read_call_bytes = loader.config.num_workers > 0 ? read_calls : -1;
}

// A loader iterated off its process's main thread: the thread, and what its
// hand-offs (the time between its next() calls) spent on CPU and waiting.
void MeasurePrefetchThread(const Trace& trace, const LoaderSpans& spans, bool sampled,
                           std::span<const uint64_t> epoch_starts_ns, LoaderAnalysis& loader) {
  loader.prefetch_thread = {};
  if (spans.off_main_thread == 0) return;
  auto& p = loader.prefetch_thread;
  const ThreadInfo& thread = trace.threads[spans.off_main_thread - 1];
  p.present = true;
  p.tid = thread.tid;
  const SpanTable& s = trace.spans;
  const CounterEstimator counters(s, spans.handouts, sampled, epoch_starts_ns);
  double known_wall = 0;
  for (uint32_t h : spans.handouts) {
    p.handouts++;
    p.handout_s += s.duration_ns[h] * kNs;
    const SpanCounters c = counters.At(h);
    if (!c.known) continue;
    known_wall += s.duration_ns[h] * kNs;
    p.cpu_s += c.cpu_ns * kNs;
    p.delay_s += c.delay_ns * kNs;
  }
  if (known_wall <= 0) return;
  const double blocked_ratio = std::clamp((known_wall - p.cpu_s - p.delay_s) / known_wall, 0.0, 1.0);
  // Scaled to the spans without counters, so the figures add up to the wall time.
  const double scale = p.handout_s / known_wall;
  p.cpu_s *= scale;
  p.delay_s *= scale;
  double steady_compute = 0, steady_step = 0;
  for (const Iteration& it : loader.iterations)
    if ((it.steady || loader.steady_fallback) && !it.compute_unknown) {
      steady_compute += it.compute_s;
      steady_step += it.step_s;
    }
  p.steady_blocked_share = steady_step > 0 ? blocked_ratio * steady_compute / steady_step : 0;
}

void FillSummaries(LoaderAnalysis& loader) {
  // Steady state: the iterations past the warmup with a known step; all of
  // them when there are none, or when the only ones are epochs' partial last
  // batches. Epochs one batch longer than the warm-up left just those (the
  // torchaudio speech-command tutorial on 1354 clips, batch 256: 6 batches an
  // epoch, the steady state 4 batches of 74 samples), and their compute
  // priced a full batch at a third of its time (whatif's baseline +122%).
  loader.steady_fallback = std::none_of(loader.iterations.begin(), loader.iterations.end(), [&](const Iteration& it) {
    return it.steady && !it.compute_unknown && !loader.PartialLastBatch(it);
  });
  const bool steady_only = !loader.steady_fallback;
  // The same buffers for each figure, filled in turn: a buffer per figure
  // would be that much more fresh memory (on a VM, zeroed and faulted in by the host).
  HugeVector<double> all, steady;
  all.reserve(loader.iterations.size());
  steady.reserve(loader.iterations.size());
  auto summarize = [&](auto figure, bool with_unknown_compute, Summary& whole_run, Summary& steady_state) {
    all.clear();
    steady.clear();
    for (const auto& it : loader.iterations) {
      if (!with_unknown_compute && it.compute_unknown) continue;
      all.push_back(figure(it));
      if (!steady_only || it.steady) steady.push_back(figure(it));
    }
    whole_run = analysis::SummarizeInPlace(all);
    steady_state = analysis::SummarizeInPlace(steady);
  };
  summarize([](const Iteration& it) { return it.step_s; }, false, loader.step_all, loader.step_steady);
  summarize([](const Iteration& it) { return it.wait_s; }, true, loader.wait_all, loader.wait_steady);
  summarize([](const Iteration& it) { return it.compute_s; }, false, loader.compute_all, loader.compute_steady);
  // Stall fractions, verdict and bottleneck come from the account (account.cpp).
}

// LoaderAnalysis::first_epoch from the epochs; `storage_known`: their
// storage_s came from the account (FillAccount), so device reads are weighed
// by the time they cost, not only by their bytes.
FirstEpochComparison CompareFirstEpoch(const std::vector<EpochStats>& epochs, bool storage_known) {
  FirstEpochComparison c;
  // A last epoch left after a few batches (the run ended in it) is mostly
  // its start-up: 2 batches of a re-created iterator read 1.67x slower than
  // a first epoch of 58, from the workers' start alone.
  size_t later_end = epochs.size();
  if (const EpochStats& last = epochs.back();
      epochs.size() >= 2 && (!last.has_end_call || last.ended_by_deletion) && 2 * last.iterations < epochs[0].iterations)
    --later_end;
  if (later_end < 2 || epochs[0].samples_per_s <= 0) return c;
  double samples = 0, seconds = 0, compute = 0, wait = 0, batches = 0, disk = 0, storage = 0;
  bool has_system = epochs[0].has_system;
  for (size_t i = 1; i < later_end; ++i) {
    samples += epochs[i].samples;
    seconds += epochs[i].seconds;
    compute += epochs[i].compute_per_batch_s * static_cast<double>(epochs[i].Stepped());
    wait += epochs[i].wait_per_batch_s * static_cast<double>(epochs[i].Stepped());
    batches += static_cast<double>(epochs[i].Stepped());
    disk += epochs[i].disk_read_bytes;
    storage += epochs[i].storage_s;
    has_system = has_system && epochs[i].has_system;
  }
  if (seconds <= 0 || samples <= 0) return c;
  c.available = true;
  c.first_samples_per_s = epochs[0].samples_per_s;
  c.later_samples_per_s = samples / seconds;
  const double ratio = c.later_samples_per_s / c.first_samples_per_s;
  if (ratio <= 1.1 && ratio >= 1 / 1.1) {
    c.why = "about the same";
    return c;
  }
  const EpochStats& first = epochs[0];
  std::vector<std::string> parts;
  // Per epoch, the later ones' mean.
  const double later_disk = disk / static_cast<double>(later_end - 1);
  const double later_storage = storage / static_cast<double>(later_end - 1);
  constexpr double kReadSeen = 1 << 20;
  // Device reads that differ are named first where the storage time they cost
  // differs by a tenth of the gap between the epochs or more; reads the loop
  // did not wait for (a fast device, or workers ahead of it) are named last,
  // with their cost, so that the time goes to what took it.
  std::string reads_at_little_cost;
  if (has_system && std::max(first.disk_read_bytes, later_disk) >= kReadSeen &&
      (first.disk_read_bytes > 2 * later_disk || later_disk > 2 * first.disk_read_bytes)) {
    std::string reads = fmt::format("the first epoch read {} from the device, the later ones {} each{}",
                                    FormatBytes(first.disk_read_bytes), FormatBytes(later_disk),
                                    first.disk_read_bytes > later_disk ? " (the page cache warmed)" : "");
    const double gap = std::abs(first.seconds - first.samples / c.later_samples_per_s);
    if (!storage_known) {
      parts.push_back(reads);
    } else if (std::abs(first.storage_s - later_storage) >= 0.1 * gap) {
      parts.push_back(fmt::format("{}: storage {} in the first epoch, {} a later one", reads, FormatSeconds(first.storage_s),
                                  FormatSeconds(later_storage)));
    } else {
      reads_at_little_cost = fmt::format("{}, which cost little: storage {} in the first epoch, {} a later one", reads,
                                         FormatSeconds(first.storage_s), FormatSeconds(later_storage));
    }
  }
  const auto differ = [](double a, double b) { return a > 1.1 * b || b > 1.1 * a; };
  if (batches > 0 && first.Stepped() > 0) {
    const double later_compute = compute / batches, later_wait = wait / batches;
    if (differ(first.compute_per_batch_s, later_compute))
      parts.push_back(fmt::format("the steps took {} a batch in the first epoch, {} later{}",
                                  FormatSeconds(first.compute_per_batch_s), FormatSeconds(later_compute),
                                  first.compute_per_batch_s > later_compute
                                      ? " (the training step warming up: its allocator, caches, lazy initialisation)"
                                      : ""));
    if (differ(first.wait_per_batch_s, later_wait) &&
        std::abs(first.wait_per_batch_s - later_wait) > 0.1 * std::abs(first.compute_per_batch_s - later_compute))
      parts.push_back(fmt::format("next() waited {} a batch in the first epoch, {} later",
                                  FormatSeconds(first.wait_per_batch_s), FormatSeconds(later_wait)));
  }
  if (!reads_at_little_cost.empty()) parts.push_back(reads_at_little_cost);
  c.why = fmt::format("later {:.2f}x {}", ratio > 1 ? ratio : 1 / ratio, ratio > 1 ? "faster" : "slower");
  if (!parts.empty()) {
    c.why += ": " + parts[0];
    for (size_t i = 1; i < parts.size(); ++i) c.why += "; " + parts[i];
  } else if (ratio > 1) {
    c.why += ": warm-up";
  }
  return c;
}

void FillEpochs(const Trace& trace, LoaderAnalysis& loader) {
  const auto& sys = trace.system;
  bool has_system = sys.t_ns.size() >= 2;
  loader.samples = 0;
  loader.active_s = 0;
  for (auto& epoch : loader.epochs) epoch.unstepped = 0;
  for (const auto& it : loader.iterations)
    if (it.compute_unknown && it.epoch < loader.epochs.size()) loader.epochs[it.epoch].unstepped++;
  for (size_t e = 0; e < loader.epochs.size(); ++e) {
    auto& epoch = loader.epochs[e];
    double samples = (epoch.iterations - epoch.unstepped) * loader.config.batch_size;
    const uint64_t per_epoch = loader.config.SamplesPerEpoch();
    if (per_epoch > 0 && samples > per_epoch && (epoch.iterations - 1) * loader.config.batch_size < per_epoch)
      samples = static_cast<double>(per_epoch);  // the last batch was partial
    epoch.samples = samples;
    epoch.seconds = (epoch.end_ns - epoch.start_ns + epoch.step_after_end_ns) * kNs - epoch.nested_s;
    epoch.samples_per_s = epoch.seconds > 0 ? samples / epoch.seconds : 0;
    // stall_fraction: from the epoch's own account (FillAccount).
    loader.samples += samples;
    loader.active_s += epoch.seconds;
    epoch.has_system = has_system && epoch.start_ns >= sys.t_ns.front() && epoch.end_ns <= sys.t_ns.back();
    if (has_system) {
      epoch.page_cache_growth_bytes =
          internal::SeriesAt(sys.t_ns, sys.page_cache_bytes, epoch.end_ns) - internal::SeriesAt(sys.t_ns, sys.page_cache_bytes, epoch.start_ns);
      epoch.disk_read_bytes = SeriesDelta(sys.t_ns, sys.disk_read_bytes, epoch.start_ns, epoch.end_ns);
    }
  }
  loader.samples_per_s = loader.active_s > 0 ? loader.samples / loader.active_s : 0;
  for (auto& epoch : loader.epochs) epoch.compute_per_batch_s = epoch.wait_per_batch_s = 0;
  for (const auto& it : loader.iterations) {
    if (it.compute_unknown || it.epoch >= loader.epochs.size()) continue;
    loader.epochs[it.epoch].compute_per_batch_s += it.compute_s;
    loader.epochs[it.epoch].wait_per_batch_s += it.wait_s;
  }
  for (auto& epoch : loader.epochs)
    if (epoch.Stepped() > 0) {
      epoch.compute_per_batch_s /= static_cast<double>(epoch.Stepped());
      epoch.wait_per_batch_s /= static_cast<double>(epoch.Stepped());
    }
  // Steady samples/s: full and partial batches at their steady steps (the
  // iterations step_steady summarizes, FillSummaries), weighed as often as
  // they came in the run: the steady iterations are each epoch's tail, where
  // a partial last batch weighs more than in the epoch (1 of 4 against 1 of 9).
  double full_step = 0, partial_step = 0, partial_samples = 0, full_compute = 0, partial_compute = 0;
  uint64_t full = 0, partial = 0, partial_in_run = 0;
  for (const auto& epoch : loader.epochs)
    if (epoch.iterations > 0 && epoch.samples < epoch.iterations * loader.config.batch_size) partial_in_run++;
  for (const auto& it : loader.iterations) {
    if (it.compute_unknown || (!loader.steady_fallback && !it.steady) || it.epoch >= loader.epochs.size()) continue;
    const auto& epoch = loader.epochs[it.epoch];
    if (loader.PartialLastBatch(it)) {
      partial_step += it.step_s;
      partial_compute += it.compute_s;
      partial_samples += epoch.samples - (epoch.iterations - 1) * loader.config.batch_size;
      partial++;
    } else {
      full_step += it.step_s;
      full_compute += it.compute_s;
      full++;
    }
  }
  const double b = loader.config.batch_size;
  const double share = !partial ? 0 : !full ? 1 : static_cast<double>(partial_in_run) / loader.iterations.size();
  const double step = (full ? (1 - share) * full_step / full : 0) + (partial ? share * partial_step / partial : 0);
  const double samples = (1 - share) * b + (partial ? share * partial_samples / partial : 0);
  loader.steady_samples_per_s = step > 0 ? samples / step : 0;
  loader.steady_compute_per_batch_s =
      (full ? (1 - share) * full_compute / full : 0) + (partial ? share * partial_compute / partial : 0);
}

// The read span of `reads` (indices sorted by start) that contains span f, or -1.
int64_t ContainingSpan(const SpanTable& s, const std::vector<uint32_t>& reads, uint32_t f) {
  auto it = std::upper_bound(reads.begin(), reads.end(), s.start_ns[f],
                             [&](uint64_t t, uint32_t r) { return t < s.start_ns[r]; });
  if (it == reads.begin()) return -1;
  const uint32_t r = *(it - 1);
  return s.start_ns[r] + s.duration_ns[r] >= s.start_ns[f] + s.duration_ns[f] ? static_cast<int64_t>(r) : -1;
}

// Pairs every fetch span that has CPU time with the read spans of its thread.
void FillFetchReads(const Trace& trace, std::span<const uint32_t> fetches,
                    const std::unordered_map<uint32_t, ThreadReads>& reads_of_thread, LoaderAnalysis& loader) {
  const auto& s = trace.spans;
  // Per epoch, by where each fetch ended: the measured fetches and their device bytes.
  struct EpochReads {
    uint64_t measured = 0, reading = 0;  // measured fetches, those that read from the device
    double device_bytes = 0, most = 0;   // their device bytes, the most one fetch read
  };
  std::vector<EpochReads> epochs(loader.epochs.size());
  // The epochs are in start order: the last one started at or before t.
  auto epoch_of = [&](uint64_t t) -> EpochReads* {
    auto after = std::upper_bound(loader.epochs.begin(), loader.epochs.end(), t,
                                  [](uint64_t time, const EpochStats& e) { return time < e.start_ns; });
    if (after == loader.epochs.begin() || t > std::prev(after)->end_ns) return nullptr;
    return &epochs[static_cast<size_t>(std::prev(after) - loader.epochs.begin())];
  };
  std::unordered_map<uint32_t, uint64_t> first_start;  // per thread, its first fetch's start
  for (uint32_t f : fetches) {
    auto [it, added] = first_start.try_emplace(s.thread[f], s.start_ns[f]);
    if (!added) it->second = std::min(it->second, s.start_ns[f]);
  }
  for (uint32_t f : fetches) {
    if (!s.has_cpu[f]) continue;
    auto found = reads_of_thread.find(s.thread[f]);
    if (found == reads_of_thread.end()) continue;
    const int64_t storage = ContainingSpan(s, found->second.storage, f);
    const int64_t calls = ContainingSpan(s, found->second.calls, f);
    if (storage < 0 || calls < 0) continue;
    const int64_t system = ContainingSpan(s, found->second.system, f);
    loader.fetch_reads.push_back({static_cast<double>(s.cpu_ns[f]) * kNs, static_cast<double>(s.arg[storage]),
                                  static_cast<double>(s.arg[calls]),
                                  system < 0 ? -1.0 : static_cast<double>(s.arg[system]) * kNs,
                                  s.start_ns[f] == first_start[s.thread[f]]});
    if (EpochReads* epoch = epoch_of(s.start_ns[f] + s.duration_ns[f])) {
      const auto bytes = static_cast<double>(s.arg[storage]);
      epoch->measured++;
      epoch->reading += bytes > 0;
      epoch->device_bytes += bytes;
      epoch->most = std::max(epoch->most, bytes);
    }
  }
  // Complete: to StopIteration, over the dataset (an IterableDataset, without
  // a len, over what it streams; a sampler of fewer samples,
  // or one with replacement, reads part of it however cold). And read by many
  // fetches, none holding half of it: what one fetch reads once (232 KiB in
  // one of 50 fetches of an in-memory dataset, on a fresh machine: modules,
  // most likely) is not a dataset. A cold memory-mapped one read 400 MiB in 27 of 100 fetches
  // (readahead served the rest).
  constexpr uint64_t kMinReadingFetches = 3;
  const double dataset = static_cast<double>(loader.config.dataset_len);
  for (size_t e = 0; e < epochs.size(); ++e) {
    const EpochStats& epoch = loader.epochs[e];
    if (!epoch.has_end_call || epochs[e].reading < kMinReadingFetches || epochs[e].most >= 0.5 * epochs[e].device_bytes ||
        (dataset > 0 && epoch.samples < dataset - loader.config.batch_size))
      continue;
    // The measured fetches' bytes alone, a lower bound: the budget skips
    // fetches that follow quick ones (it frees up after slow spans), which
    // mostly found their pages cached, so scaling the measured mean up to
    // them overestimated a memory-mapped dataset by 20%.
    loader.complete_epoch_device_bytes_per_sample =
        std::max(loader.complete_epoch_device_bytes_per_sample, epochs[e].device_bytes / epoch.samples);
  }
}

// What the account needs of each fetch span: its times, CPU and the bytes its
// thread read (the read spans that contain it; -1 when not recorded).
internal::FetchFactList FetchFacts(const Trace& trace, std::span<const uint32_t> fetches,
                                            const CounterEstimator& counters,
                                            const std::unordered_map<uint32_t, ThreadReads>& reads_of_thread) {
  const auto& s = trace.spans;
  internal::FetchFactList out;
  out.reserve(fetches.size());
  for (uint32_t f : fetches) {
    internal::FetchFact x;
    x.start_ns = s.start_ns[f];
    x.end_ns = s.start_ns[f] + s.duration_ns[f];
    x.batch = s.arg[f];
    x.pid = trace.threads[s.thread[f]].pid;
    const SpanCounters c = counters.At(f);
    x.has_cpu = c.known;
    x.estimated = c.estimated;
    x.cpu_ns = c.cpu_ns;
    x.delay_ns = c.delay_ns;
    x.thread = s.thread[f];
    if (auto found = reads_of_thread.find(s.thread[f]); found != reads_of_thread.end()) {
      const int64_t storage = ContainingSpan(s, found->second.storage, f);
      const int64_t calls = ContainingSpan(s, found->second.calls, f);
      if (storage >= 0) {
        x.device_bytes = static_cast<int64_t>(s.arg[storage]);
        x.reading = x.device_bytes > 0 ? 1.0f : 0.0f;
      }
      if (calls >= 0) x.call_bytes = static_cast<int64_t>(s.arg[calls]);
      if (const int64_t system = ContainingSpan(s, found->second.system, f); system >= 0)
        x.system_ns = static_cast<int64_t>(s.arg[system]);
    }
    out.push_back(x);
  }
  // A fetch the budget skipped has no read spans: the mean bytes per sampled
  // fetch of its stratum (its thread's sampled fetches nearest in time, in its
  // epoch) stand in for them, else its epoch's, else its thread's. A thread's
  // mean over the run gave the warm fetches of later epochs the first epoch's
  // cold reads: 98.7 MiB "from the device" where the job read 67.8 MiB.
  struct Bytes {
    double fetches = 0, device = 0, calls = 0, reading = 0;
  };
  std::unordered_map<uint64_t, Bytes> bytes_of_stratum, bytes_of_epoch, bytes_of_thread;
  std::vector<uint64_t> stratum(out.size()), epoch(out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    stratum[i] = counters.StratumOf(fetches[i]);
    epoch[i] = counters.EpochOf(fetches[i]);
    const auto& x = out[i];
    if (x.device_bytes < 0 || x.call_bytes < 0) continue;
    for (Bytes* b : {&bytes_of_stratum[stratum[i]], &bytes_of_epoch[epoch[i]], &bytes_of_thread[x.thread]}) {
      b->fetches += 1;
      b->reading += x.device_bytes > 0;
      b->device += static_cast<double>(x.device_bytes);
      b->calls += static_cast<double>(x.call_bytes);
    }
  }
  for (size_t i = 0; i < out.size(); ++i) {
    auto& x = out[i];
    if (!x.estimated || x.device_bytes >= 0) continue;
    const Bytes* mean = nullptr;
    if (auto found = bytes_of_stratum.find(stratum[i]); found != bytes_of_stratum.end())
      mean = &found->second;
    else if (auto of_epoch = bytes_of_epoch.find(epoch[i]); of_epoch != bytes_of_epoch.end())
      mean = &of_epoch->second;
    else if (auto of_thread = bytes_of_thread.find(x.thread); of_thread != bytes_of_thread.end())
      mean = &of_thread->second;
    if (!mean) continue;
    const Bytes& b = *mean;
    x.device_bytes = std::llround(b.device / b.fetches);
    x.call_bytes = std::llround(b.calls / b.fetches);
    x.reading = static_cast<float>(b.reading / b.fetches);
  }
  return out;
}

void FillWorkers(const Trace& trace, std::span<const uint32_t> fetches, const CounterEstimator& counters,
                 LoaderAnalysis& loader) {
  const auto& s = trace.spans;
  // By thread index (small and dense), in thread order: a vector, not a map lookup per fetch.
  std::vector<WorkerStats> by_thread(trace.threads.size());
  std::vector<std::pair<uint64_t, uint64_t>> span_of_thread(trace.threads.size(),  // first start, last end
                                                            {std::numeric_limits<uint64_t>::max(), 0});
  HugeVector<double> produce;
  produce.reserve(fetches.size());
  struct Cost {
    uint64_t start_ns;
    uint64_t batch;  // index in its epoch (the span's arg)
    uint32_t thread;
    model::BatchCost cost;
  };
  HugeVector<Cost> costs;
  costs.reserve(fetches.size());
  for (uint32_t f : fetches) {
    uint32_t thread = s.thread[f];
    auto& w = by_thread[thread];
    auto& window = span_of_thread[thread];
    window.first = std::min(window.first, s.start_ns[f]);
    window.second = std::max(window.second, s.start_ns[f] + s.duration_ns[f]);
    w.thread = thread;
    w.batches++;
    double d = s.duration_ns[f] * kNs;
    produce.push_back(d);
    w.produce_s += d;
    if (const SpanCounters c = counters.At(f); c.known) {
      double cpu = c.cpu_ns * kNs, delay = c.delay_ns * kNs;
      w.cpu_s += cpu;
      w.delay_s += delay;
      w.io_s += std::max(0.0, d - cpu - delay);
      costs.push_back({s.start_ns[f], s.arg[f], thread, {static_cast<float>(cpu), static_cast<float>(std::max(0.0, d - cpu - delay))}});
    } else {
      costs.push_back({s.start_ns[f], s.arg[f], thread, {0.0f, static_cast<float>(d)}});
    }
  }
  internal::RadixSortBy(costs, [](const auto& c) { return c.start_ns; });
  loader.batch_costs.clear();
  loader.batch_costs.reserve(costs.size());
  loader.worker_fetch_position.clear();
  loader.worker_fetch_position.reserve(costs.size());
  // A worker's life: without persistent workers an epoch's (each starts its own).
  std::vector<std::pair<size_t, uint32_t>> life_of_thread(trace.threads.size(), {SIZE_MAX, 0});  // (epoch, fetches)
  const bool persistent = loader.config.persistent_workers;
  size_t epoch = 0;
  for (const auto& c : costs) {
    while (epoch + 1 < loader.epochs.size() && loader.epochs[epoch + 1].start_ns <= c.start_ns) ++epoch;
    auto& [life, fetches] = life_of_thread[c.thread];
    if (!persistent && life != epoch) life = epoch, fetches = 0;
    loader.worker_fetch_position.push_back(trace.threads[c.thread].pid != loader.pid ? fetches++ : UINT32_MAX);
    loader.batch_costs.push_back(c.cost);
  }
  // Which fetches made a steady iteration's batch (the same index in the same
  // epoch): the steady state leaves each epoch's first batches out, and their
  // fetches often cost more (caches cold after the epoch's start, a
  // validation pass before it); a model drawing from every fetch predicted a
  // loader without workers 6-8% below its own measured steady state.
  loader.batch_cost_steady.clear();
  if (!loader.steady_fallback && !loader.epochs.empty()) {
    std::vector<std::vector<bool>> steady_of_epoch(loader.epochs.size());
    for (const auto& it : loader.iterations) {
      auto& of_epoch = steady_of_epoch[it.epoch];
      if (of_epoch.size() <= it.index_in_epoch) of_epoch.resize(it.index_in_epoch + 1, false);
      of_epoch[it.index_in_epoch] = it.steady && !it.compute_unknown;
    }
    loader.batch_cost_steady.reserve(costs.size());
    size_t e = 0;  // costs come in start order, and so do the epochs
    for (const auto& c : costs) {
      while (e + 1 < loader.epochs.size() && loader.epochs[e + 1].start_ns <= c.start_ns) ++e;
      const auto& of_epoch = steady_of_epoch[e];
      loader.batch_cost_steady.push_back(c.batch < of_epoch.size() && of_epoch[c.batch]);
    }
  }
  loader.produce = analysis::SummarizeInPlace(produce);
  auto epoch_of = [&](uint64_t t) -> size_t {
    size_t e = 0;
    while (e + 1 < loader.epochs.size() && loader.epochs[e + 1].start_ns <= t) ++e;
    return e;
  };
  std::vector<std::pair<uint64_t, uint64_t>> active;  // per worker: its first fetch's start, its last's end
  for (uint32_t thread = 0; thread < by_thread.size(); ++thread) {
    WorkerStats& w = by_thread[thread];
    if (w.batches == 0) continue;  // no fetch on this thread
    const ThreadInfo& info = trace.threads[thread];
    w.pid = info.pid;
    w.tid = info.tid;
    w.in_main_process = info.pid == loader.pid;
    auto [first, last] = span_of_thread[thread];
    if (!loader.epochs.empty()) {
      const auto& a = loader.epochs[epoch_of(first)];
      const auto& b = loader.epochs[epoch_of(last)];
      uint64_t from = std::min(a.start_ns, first), to = std::max(b.end_ns, last);
      w.window_s = (to - from) * kNs;
    } else {
      w.window_s = (last - first) * kNs;
    }
    if (w.window_s > 0) {
      w.busy_fraction = std::min(1.0, w.produce_s / w.window_s);
      w.cpu_fraction = w.cpu_s / w.window_s;
      w.io_fraction = w.io_s / w.window_s;
      w.delay_fraction = w.delay_s / w.window_s;
    }
    w.mean_produce_s = w.batches ? w.produce_s / w.batches : 0;
    loader.workers.push_back(w);
    active.emplace_back(first, last);
  }
  if (loader.workers.size() >= 2) {
    // Against the median of the other workers that fetched while it did: with
    // two, the median of both would hide a worker 1.7x slower than the other
    // (a skewed shard of an IterableDataset: 40.9 against 24.0 ms a batch).
    // Workers of other epochs (not persistent: each epoch starts its own) ran
    // beside another step and other workers: 8 workers on 2 cores fetched in
    // 283-317 ms in a first epoch, its 8 successors in 88-111 ms, and all the
    // first 8 read as stragglers.
    // The imbalance, too, is among workers that fetched at the same time:
    // the last epoch's workers, left after 2 batches, are not behind the
    // first epoch's 29.
    std::vector<double> others;
    for (size_t i = 0; i < loader.workers.size(); ++i) {
      WorkerStats& w = loader.workers[i];
      others.clear();
      uint64_t min_batches = w.batches, max_batches = w.batches;
      for (size_t j = 0; j < loader.workers.size(); ++j)
        if (j != i && active[j].first <= active[i].second && active[i].first <= active[j].second) {
          others.push_back(loader.workers[j].mean_produce_s);
          min_batches = std::min(min_batches, loader.workers[j].batches);
          max_batches = std::max(max_batches, loader.workers[j].batches);
        }
      if (min_batches > 0)
        loader.worker_imbalance = std::max(loader.worker_imbalance, static_cast<double>(max_batches) / min_batches - 1);
      std::sort(others.begin(), others.end());
      const double median = others.empty() ? 0 : Quantile(others, 0.5);
      // A mean of a few batches is one batch's noise (short epochs of
      // non-persistent workers: one batch each), not a slow worker.
      constexpr uint64_t kStragglerMinBatches = 4;
      w.straggler = w.batches >= kStragglerMinBatches && median > 0 && w.mean_produce_s > 1.5 * median;
    }
  }
}

RunCoverage MeasureCoverage(const Trace& trace, const std::vector<LoaderAnalysis>& loaders, uint64_t start, uint64_t end) {
  RunCoverage c;
  std::vector<std::pair<uint64_t, uint64_t>> epochs;
  for (const auto& l : loaders)
    for (const auto& e : l.epochs)
      if (e.end_ns > e.start_ns) epochs.emplace_back(e.start_ns, e.end_ns);
  if (epochs.empty() || end <= start) return c;
  std::sort(epochs.begin(), epochs.end());
  c.before_s = (std::clamp(epochs.front().first, start, end) - start) * kNs;
  uint64_t covered_to = std::clamp(epochs.front().first, start, end);
  for (auto [from, to] : epochs) {
    from = std::clamp(from, start, end);
    to = std::clamp(to, start, end);
    if (from > covered_to) c.between_s += (from - covered_to) * kNs;
    if (to > std::max(from, covered_to)) c.in_epochs_s += (to - std::max(from, covered_to)) * kNs;
    covered_to = std::max(covered_to, to);
  }
  c.after_s = (end - covered_to) * kNs;
  // The sampler's ticks inside [start, first epoch]: two at least, else unknown.
  const uint64_t first = std::clamp(epochs.front().first, start, end);
  const auto& sys = trace.system;
  const auto ticks_before = std::count_if(sys.t_ns.begin(), sys.t_ns.end(), [&](uint64_t t) { return t >= start && t <= first; });
  if (ticks_before >= 2) {
    if (sys.disk_read_bytes.size() == sys.t_ns.size())
      c.before_disk_read_bytes = SeriesDelta(sys.t_ns, sys.disk_read_bytes, start, first);
    double cpu_s = 0;
    for (const auto& p : trace.process_series)
      if (p.cpu_ns.size() == p.t_ns.size()) cpu_s += SeriesDelta(p.t_ns, p.cpu_ns, start, first) * kNs;
    if (c.before_s > 0) c.before_job_cores = cpu_s / c.before_s;
  }
  return c;
}

// Settings the hook did not report but the spans show.
void InferMissingConfig(const Trace& trace, LoaderAnalysis& loader) {
  bool has_num_workers = false;
  for (const auto& c : trace.configs)
    has_num_workers |= c.pid == loader.pid && c.key == "num_workers" &&
                       std::find(loader.scopes.begin(), loader.scopes.end(), c.scope) != loader.scopes.end();
  if (!has_num_workers) {
    std::set<uint32_t> pids;
    for (const auto& w : loader.workers)
      if (!w.in_main_process) pids.insert(w.pid);
    loader.config.num_workers = static_cast<uint32_t>(pids.size());
  }
}

void FillPrefetch(const Trace& trace, std::span<const uint32_t> fetches, LoaderAnalysis& loader) {
  const auto& s = trace.spans;
  bool in_workers = false;
  for (const auto& w : loader.workers) in_workers |= !w.in_main_process;
  loader.prefetch.capacity = loader.config.num_workers * loader.config.prefetch_factor;
  HugeVector<uint64_t> ends;
  ends.reserve(fetches.size());
  for (uint32_t f : fetches)
    if (trace.threads[s.thread[f]].pid != loader.pid) ends.push_back(s.start_ns[f] + s.duration_ns[f]);
  internal::RadixSortBy(ends, [](uint64_t end) { return end; });
  // The fetch span of each batch (arg = the batch index in its epoch) and each
  // worker thread's fetch intervals, to tell a batch that could be handed over
  // from one still sitting in a busy worker: a worker that goes straight on to
  // its next batch may hold the GIL and starve the thread that sends the
  // finished one (CPU-bound Python transforms), so "finished" is not "sent".
  internal::FetchesByBatch fetch_of_batch;
  fetch_of_batch.Reserve(fetches.size());
  // Per thread (an index into Trace::threads, a small dense number): not a hash lookup per iteration.
  std::vector<HugeVector<std::pair<uint64_t, uint64_t>>> busy_of_thread(trace.threads.size());
  {
    std::vector<size_t> fetches_of_thread(trace.threads.size());  // reserved: no copy as they grow
    for (uint32_t f : fetches) fetches_of_thread[s.thread[f]]++;
    for (size_t t = 0; t < busy_of_thread.size(); ++t) busy_of_thread[t].reserve(fetches_of_thread[t]);
  }
  for (uint32_t f : fetches) {
    if (trace.threads[s.thread[f]].pid == loader.pid) continue;
    fetch_of_batch.Add(s.arg[f], s.start_ns[f], f);
    busy_of_thread[s.thread[f]].emplace_back(s.start_ns[f], s.start_ns[f] + s.duration_ns[f]);
  }
  fetch_of_batch.Sort();
  for (auto& intervals : busy_of_thread)  // a thread's fetches come in the order it ran them: checked, not sorted again
    if (!std::is_sorted(intervals.begin(), intervals.end())) std::sort(intervals.begin(), intervals.end());
  auto busy_at = [&](uint32_t thread, uint64_t t) {
    const auto& iv = busy_of_thread[thread];
    auto it = std::upper_bound(iv.begin(), iv.end(), std::make_pair(t, UINT64_MAX));
    return it != iv.begin() && std::prev(it)->second > t;
  };
  auto deliverable = [&](const Iteration& it) {
    const int64_t best = fetch_of_batch.FirstAtOrAfter(it.batch_index, loader.epochs[it.epoch].iterator_start_ns);
    if (best == internal::FetchesByBatch::kNoBatch) return it.ready_batches > 0;  // batch indices unknown: occupancy alone
    if (best < 0) return false;
    const uint64_t end = s.start_ns[best] + s.duration_ns[best];
    return end <= it.wait_start_ns && !busy_at(s.thread[best], it.wait_start_ns);
  };
  uint64_t starved = 0, total = 0;
  double sum = 0;
  // Iterations come in wait_start_ns order (BuildIterations), and so do their
  // epochs' starts: the fetches ended by then, and before the epoch began, are
  // two cursors moving forward through `ends`, not two binary searches each.
  size_t ended_by_wait = 0, ended_before_epoch = 0;
  for (auto& it : loader.iterations) {
    int64_t ready = 0;
    if (in_workers) {
      const uint64_t iterator_start = loader.epochs[it.epoch].iterator_start_ns;
      while (ended_by_wait < ends.size() && ends[ended_by_wait] <= it.wait_start_ns) ++ended_by_wait;
      while (ended_before_epoch < ends.size() && ends[ended_before_epoch] < iterator_start) ++ended_before_epoch;
      const auto produced = static_cast<int64_t>(ended_by_wait) - static_cast<int64_t>(ended_before_epoch);
      ready = std::max<int64_t>(0, produced - it.batch_index);
    }
    it.ready_batches = static_cast<int32_t>(std::min<int64_t>(ready, std::numeric_limits<int32_t>::max()));
    it.batch_deliverable = in_workers && deliverable(it);
    sum += static_cast<double>(ready);
    loader.prefetch.max_ready = std::max<uint32_t>(loader.prefetch.max_ready, static_cast<uint32_t>(it.ready_batches));
    starved += ready == 0;
    total++;
  }
  loader.prefetch.mean_ready = total ? sum / total : 0;
  loader.prefetch.starved_fraction = total ? static_cast<double>(starved) / total : 0;
  loader.prefetch.ever_full = loader.prefetch.capacity > 0 && loader.prefetch.max_ready >= loader.prefetch.capacity;
  // A worker that had the next batch's index waiting when it finished its
  // previous fetch went straight on: the gap between its two fetches is its
  // loop's serial part. torch sends batch k's index as the main loop takes
  // batch k - workers x prefetch_factor (the first ones at the iterator's
  // creation).
  const uint64_t in_flight = loader.prefetch.capacity;
  if (!in_workers || in_flight == 0) return;
  std::vector<double> gaps;
  for (size_t i = 0; i < loader.iterations.size(); ++i) {
    const Iteration& it = loader.iterations[i];
    const uint64_t iterator_start = loader.epochs[it.epoch].iterator_start_ns;
    const int64_t f = fetch_of_batch.FirstAtOrAfter(it.batch_index, iterator_start);
    if (f < 0) continue;
    uint64_t sent = iterator_start;
    if (it.batch_index >= in_flight) {
      // The batch's index went out as the loop took the one in_flight before
      // it, of the same iterator (a kept iterator's: maybe an epoch before).
      if (i < in_flight) continue;
      const Iteration& taker = loader.iterations[i - in_flight];
      if (taker.batch_index + in_flight != it.batch_index ||
          loader.epochs[taker.epoch].iterator_start_ns != iterator_start)
        continue;
      sent = taker.return_ns;
    }
    const auto& iv = busy_of_thread[s.thread[f]];
    auto at = std::lower_bound(iv.begin(), iv.end(), std::make_pair(s.start_ns[f], uint64_t{0}));
    if (at == iv.begin()) continue;
    const uint64_t previous_end = std::prev(at)->second;
    if (sent <= previous_end && previous_end <= s.start_ns[f]) gaps.push_back((s.start_ns[f] - previous_end) * kNs);
  }
  loader.prefetch.serial_gaps = gaps.size();
  if (!gaps.empty()) {
    std::nth_element(gaps.begin(), gaps.begin() + gaps.size() / 2, gaps.end());
    loader.prefetch.serial_gap_s = gaps[gaps.size() / 2];
  }
  // Did the batch wait in its worker for the GIL while the worker ran a later
  // fetch? Only next() calls made while such a fetch ran and well before it
  // ended tell: a batch already sent returns after the main thread's own
  // receiving; one held returns as that fetch ends (measured: with a 5 ms and
  // a 10 ms fetch of pure Python alike, not at Python's 5 ms switch interval).
  constexpr uint64_t kTellNs = 500'000;
  for (const auto& it : loader.iterations) {
    if (it.batch_index == 0) continue;
    const int64_t f = fetch_of_batch.FirstAtOrAfter(it.batch_index, loader.epochs[it.epoch].iterator_start_ns);
    if (f < 0) continue;
    const uint64_t end = s.start_ns[f] + s.duration_ns[f];
    if (it.wait_start_ns <= end) continue;  // the main thread was waiting for the fetch itself
    // The fetch the worker was running at the call (its next, or a later one with a deeper prefetch).
    const auto& iv = busy_of_thread[s.thread[f]];
    auto next = std::upper_bound(iv.begin(), iv.end(), std::make_pair(it.wait_start_ns, UINT64_MAX));
    if (next == iv.begin()) continue;
    --next;
    if (next->first < end || next->second <= it.wait_start_ns) continue;
    const uint64_t gives_up = next->second;
    const double receive_ns = it.receive_s > 0 ? it.receive_s * 1e9 : 0;
    const double arrived = static_cast<double>(it.return_ns) - receive_ns;
    const double halfway = static_cast<double>(it.wait_start_ns) + 0.5 * static_cast<double>(gives_up - it.wait_start_ns);
    const bool held = arrived >= halfway;
    if (it.steady || loader.steady_fallback) {
      const uint64_t from = std::min(held ? gives_up : it.wait_start_ns, it.return_ns);
      loader.prefetch.held_handoff_s += static_cast<double>(it.return_ns - from) * 1e-9;
    }
    if (gives_up < it.wait_start_ns + kTellNs) continue;
    (held ? loader.prefetch.sends_held : loader.prefetch.sends_free)++;
  }
}

// Whether the loader's fetches held the GIL: each probe of the hook's
// (names::kGilProbe) against the fetch of its process it asked during (the
// main process's without workers, a worker's with them).
void CountGilProbes(const Trace& trace, std::span<const uint32_t> probes, std::span<const uint32_t> fetches,
                    LoaderAnalysis& loader) {
  if (probes.empty()) return;
  const auto& s = trace.spans;
  auto pid_of = [&](uint32_t i) { return trace.threads[s.thread[i]].pid; };
  auto of_loader = [&](uint32_t i) {
    return std::find(loader.scopes.begin(), loader.scopes.end(), s.scope[i]) != loader.scopes.end();
  };
  // (pid, start, end) of the loader's fetches, by process and start.
  std::vector<std::tuple<uint32_t, uint64_t, uint64_t>> by_process;
  by_process.reserve(fetches.size());
  for (uint32_t f : fetches) by_process.emplace_back(pid_of(f), s.start_ns[f], s.start_ns[f] + s.duration_ns[f]);
  if (by_process.empty()) return;
  std::sort(by_process.begin(), by_process.end());
  constexpr uint64_t kTellNs = 200'000;
  for (uint32_t p : probes) {
    if (!of_loader(p)) continue;
    const uint64_t ask = s.start_ns[p];
    const uint32_t pid = pid_of(p);
    auto at = std::upper_bound(by_process.begin(), by_process.end(), std::make_tuple(pid, ask, UINT64_MAX));
    if (at == by_process.begin() || std::get<0>(*std::prev(at)) != pid) continue;
    const uint64_t end = std::get<2>(*std::prev(at));
    if (end < ask + kTellNs) continue;  // asked after the fetch, or too near its end to tell
    const double wait = static_cast<double>(s.duration_ns[p]);
    const double switch_interval = s.arg[p] > 0 ? static_cast<double>(s.arg[p]) : 5e6;
    const bool held = wait >= 0.5 * std::min(static_cast<double>(end - ask), switch_interval);
    (held ? loader.prefetch.gil_probes_held : loader.prefetch.gil_probes_free)++;
  }
}

// LoaderAnalysis::worker_setup. A worker's first kSetupFetches fetches may
// carry its set-up: each one's excess is its mean over the workers that made
// it beyond a warm worker's fetch (the median of later fetches, where at
// least kMinWarmFetches were made), and the first one's at least the first
// item's excess over the worker's other items (its getitem spans: the
// earliest, which AddToTotals keeps, against their mean). The ImageFolder
// trainer of docs/analysis.md (2 non-persistent workers, 8 batches each an
// epoch) fetched in 201-277, 114-167, 58-155 ms, then 48-70; persistent
// workers' later epochs in 45-60 ms; its validation loader's workers, one
// batch each, in 260-286 ms, of which the first item 96-103 ms (PIL
// importing its plugins) against 1.7 ms for the others.
void MeasureWorkerSetup(const std::vector<StageAccumulator>& accumulators, uint32_t getitem_name, LoaderAnalysis& loader) {
  constexpr uint32_t kSetupFetches = 4;
  constexpr size_t kMinWarmFetches = 8;
  auto& setup = loader.worker_setup;
  setup = {};
  const auto& position = loader.worker_fetch_position;
  auto& costs = loader.batch_costs;
  if (position.size() != costs.size()) return;
  struct Sum {
    double cpu = 0, io = 0;
    uint32_t count = 0;
  };
  std::array<Sum, kSetupFetches> early{};
  HugeVector<double> warm;
  double warm_cpu = 0, warm_io = 0;
  for (size_t i = 0; i < costs.size(); ++i) {
    if (position[i] == UINT32_MAX) continue;
    if (position[i] < kSetupFetches) {
      early[position[i]].cpu += costs[i].cpu_s;
      early[position[i]].io += costs[i].io_s;
      early[position[i]].count++;
    } else {
      warm.push_back(costs[i].Seconds());
      warm_cpu += costs[i].cpu_s;
      warm_io += costs[i].io_s;
    }
  }
  setup.starts = early[0].count;
  if (setup.starts == 0) return;

  // The first item: each fetching worker's earliest getitem against the mean of its others.
  std::unordered_map<uint32_t, std::pair<uint64_t, uint64_t>> first_of_thread;  // thread -> (start, duration)
  for (const auto& w : loader.workers)
    if (!w.in_main_process) first_of_thread.try_emplace(w.thread, UINT64_MAX, 0);
  uint64_t items = 0, items_wall = 0;
  for (const auto& acc : accumulators) {
    if (acc.name != getitem_name || acc.count == 0) continue;
    auto it = first_of_thread.find(acc.thread);
    if (it == first_of_thread.end()) continue;
    if (std::find(loader.scopes.begin(), loader.scopes.end(), acc.scope) == loader.scopes.end()) continue;
    items += acc.count;
    items_wall += acc.wall_ns;
    if (acc.first_start < it->second.first) it->second = {acc.first_start, acc.first_duration_ns};
  }
  uint64_t firsts = 0, firsts_wall = 0;
  for (const auto& [thread, first] : first_of_thread)
    if (first.first != UINT64_MAX) {
      firsts++;
      firsts_wall += first.second;
    }
  if (firsts > 0 && items > firsts) {
    setup.item_s = static_cast<double>(items_wall - firsts_wall) / static_cast<double>(items - firsts) * kNs;
    setup.first_item_s = std::max(0.0, static_cast<double>(firsts_wall) / firsts * kNs - setup.item_s);
  }

  uint32_t measured = 0;  // the fetches of a life whose excess is measured
  if (warm.size() >= kMinWarmFetches) {
    setup.warm_fetch_s = analysis::SummarizeInPlace(warm).p50;
    measured = kSetupFetches;
  }
  const double warm_total = warm_cpu + warm_io;
  setup.by_fetch.assign(std::max(measured, setup.first_item_s > 0 ? 1u : 0u), model::BatchCost{});
  for (uint32_t k = 0; k < setup.by_fetch.size(); ++k) {
    const Sum& e = early[k];
    if (e.count == 0) continue;
    const double mean = (e.cpu + e.io) / e.count;
    double excess = k < measured ? std::max(0.0, mean - setup.warm_fetch_s) : 0;
    if (k == 0) excess = std::max(excess, setup.first_item_s);
    excess = std::min(excess, mean);
    // Split as that fetch's own CPU and off-CPU time, beyond the warm ones' split.
    const double cpu_beyond = k < measured && warm_total > 0 ? e.cpu / e.count - warm_cpu / warm_total * setup.warm_fetch_s
                              : e.cpu + e.io > 0                 ? excess * e.cpu / (e.cpu + e.io)
                                                                 : 0;
    const double cpu = std::clamp(cpu_beyond, 0.0, excess);
    setup.by_fetch[k] = {static_cast<float>(cpu), static_cast<float>(excess - cpu)};
  }
  while (!setup.by_fetch.empty() && setup.by_fetch.back().Seconds() <= 0) setup.by_fetch.pop_back();
  for (size_t i = 0; i < costs.size(); ++i) {
    if (position[i] >= setup.by_fetch.size()) continue;
    const model::BatchCost& excess = setup.by_fetch[position[i]];
    costs[i].cpu_s = std::max(0.0f, costs[i].cpu_s - excess.cpu_s);
    costs[i].io_s = std::max(0.0f, costs[i].io_s - excess.io_s);
  }
}

// No thread's lane was ever full, and no thread went without a lane (the
// footer's total counts those too): every span emitted is in the trace.
bool NoSpanLost(const Trace& trace) {
  if (trace.footer && trace.footer->dropped > 0) return false;
  return std::none_of(trace.threads.begin(), trace.threads.end(), [](const ThreadInfo& t) { return t.dropped > 0; });
}

void FillStages(const Trace& trace, const std::vector<StageAccumulator>& accumulators, uint32_t fetch_name, bool sampled,
                LoaderAnalysis& loader) {
  std::set<uint32_t> worker_threads, worker_pids;
  double fetch_wall = 0, fetch_cpu = 0;  // over workers with CPU (measured or estimated)
  uint64_t batches = 0;
  for (const auto& w : loader.workers) {
    worker_threads.insert(w.thread);
    worker_pids.insert(w.pid);
    if (w.cpu_s > 0) {
      fetch_wall += w.produce_s;
      fetch_cpu += w.cpu_s;
    }
    batches += w.batches;
  }
  double cpu_per_wall = fetch_wall > 0 ? fetch_cpu / fetch_wall : 0;
  double samples = batches > 0 ? batches * loader.config.batch_size : loader.samples;
  struct Merged {
    StageStats stats;
    std::map<uint32_t, std::pair<uint64_t, uint64_t>> threads;  // each thread's first start and last end
    uint64_t first = std::numeric_limits<uint64_t>::max(), last = 0;
    bool all_cpu = true;
    double wall_with_cpu_s = 0;
  };
  std::map<std::string, Merged> merged;
  std::map<std::string, Merged> main_stages;  // the training loop's own, outside the fetches
  for (const auto& acc : accumulators) {
    if (acc.name == fetch_name) continue;
    uint32_t pid = trace.threads[acc.thread].pid;
    const bool in_scope = std::find(loader.scopes.begin(), loader.scopes.end(), acc.scope) != loader.scopes.end();
    // Outside the fetches: the training loop's own work when on the loader's
    // process and placed by its next() (or fetch, with num_workers=0).
    // Else a span with a scope belongs to that loader only; an unscoped one
    // (a user stage) to the loader whose worker thread ran it.
    const bool outside = acc.place == StagePlace::kOutside;
    const bool mine = outside          ? pid == loader.pid && in_scope
                      : acc.scope != 0 ? in_scope && (pid == loader.pid || worker_pids.count(pid))
                                       : worker_threads.count(acc.thread) > 0;
    if (!mine) continue;
    const std::string& name = acc.name < trace.strings.size() ? trace.strings[acc.name] : "?";
    auto& m = (outside ? main_stages : merged)[name];
    m.stats.name = name;
    m.stats.count += acc.count;
    m.stats.wall_s += acc.wall_ns * kNs;
    m.stats.cpu_s += acc.cpu_ns * kNs;
    m.all_cpu &= acc.count_with_cpu == acc.count;
    m.wall_with_cpu_s += acc.wall_with_cpu_ns * kNs;
    auto [it, fresh] = m.threads.try_emplace(acc.thread, acc.first_start, acc.last_end);
    if (!fresh) it->second = {std::min(it->second.first, acc.first_start), std::max(it->second.second, acc.last_end)};
    m.first = std::min(m.first, acc.first_start);
    m.last = std::max(m.last, acc.last_end);
  }
  double lowest = std::numeric_limits<double>::infinity();
  for (auto& [name, m] : merged) {
    auto& st = m.stats;
    if (!m.all_cpu && sampled && m.wall_with_cpu_s > 0) {
      // The counter budget skipped some: the sampled spans' CPU per wall second.
      st.cpu_source = CpuSource::kEstimated;
      st.cpu_s = st.wall_s * (st.cpu_s / m.wall_with_cpu_s);
    } else if (!m.all_cpu) {
      st.cpu_source = CpuSource::kAttributed;
      st.cpu_s = st.wall_s * cpu_per_wall;
    }
    // Threads at once, not threads in all: non-persistent workers are new
    // processes each epoch (34 threads over 17 epochs of 2 workers).
    std::vector<std::pair<uint64_t, uint64_t>> spans;
    for (const auto& [thread, span] : m.threads) spans.push_back(span);
    st.parallelism = internal::MostAtOnce(std::move(spans));
    st.elapsed_s = m.last > m.first ? (m.last - m.first) * kNs : 0;
    double cost = st.cpu_s > 0 ? st.cpu_s : st.wall_s;  // no CPU measured at all: wall-based rate
    st.per_core_rate = cost > 0 ? samples / cost : 0;
    st.observed_rate = st.elapsed_s > 0 ? samples / st.elapsed_s : 0;
    st.parallel_rate = st.per_core_rate * st.parallelism;
    st.utilization = st.elapsed_s > 0 && st.parallelism ? cost / (st.parallelism * st.elapsed_s) : 0;
    if (st.parallel_rate > 0) lowest = std::min(lowest, st.parallel_rate);
    loader.stages.push_back(st);
  }
  for (auto& st : loader.stages) st.bottleneck = st.parallel_rate > 0 && st.parallel_rate == lowest;
  for (auto& [name, m] : main_stages) {
    auto& st = m.stats;
    if (!m.all_cpu) {  // spans without CPU: at the measured ones' CPU per wall second
      st.cpu_source = CpuSource::kEstimated;
      st.cpu_s = m.wall_with_cpu_s > 0 ? st.wall_s * (st.cpu_s / m.wall_with_cpu_s) : 0;
    }
    st.parallelism = 1;
    loader.main_stages.push_back(st);
  }
  std::sort(loader.main_stages.begin(), loader.main_stages.end(),
            [](const StageStats& a, const StageStats& b) { return a.wall_s > b.wall_s; });
}

// Other processes' busy cores while the job ran: /proc/stat's busy time less
// the job's processes' CPU, over the job's first process's sampled span. A
// process born inside it counts all its CPU (a spawned worker's imports come
// before its first reading); CPU a process spent after its last reading
// (under one sampler period) is missed, and so counted outside. nullopt
// without the samples to tell.
struct OutsideLoad {
  double busy_cores = 0;
  double steal_cores = -1;  // of busy_cores, the hypervisor's (steal); -1 where the trace has no steal column
};
std::optional<OutsideLoad> OutsideBusyCores(const Trace& trace) {
  const auto& sys = trace.system;
  const size_t n = sys.t_ns.size();
  if (n < 2 || sys.cpu_busy_ns.size() != n || trace.process_series.empty()) return std::nullopt;
  const ProcessSeries* root = nullptr;
  for (const auto& ps : trace.process_series)
    if (ps.t_ns.size() >= 2 && ps.cpu_ns.size() == ps.t_ns.size() && (!root || ps.t_ns.front() < root->t_ns.front()))
      root = &ps;
  if (!root) return std::nullopt;
  const uint64_t a = std::max(root->t_ns.front(), sys.t_ns.front()), b = std::min(root->t_ns.back(), sys.t_ns.back());
  if (b <= a) return std::nullopt;
  double job_ns = 0;
  for (const auto& ps : trace.process_series) {
    if (ps.t_ns.empty() || ps.cpu_ns.size() != ps.t_ns.size() || ps.t_ns.front() > b) continue;
    const double start = &ps == root || ps.t_ns.front() <= a ? internal::SeriesAt(ps.t_ns, ps.cpu_ns, a) : 0;
    job_ns += internal::SeriesAt(ps.t_ns, ps.cpu_ns, b) - start;
  }
  const auto between = [&](const std::vector<uint64_t>& v) {
    return internal::SeriesAt(sys.t_ns, v, b) - internal::SeriesAt(sys.t_ns, v, a);
  };
  OutsideLoad out;
  out.busy_cores = std::max(0.0, (between(sys.cpu_busy_ns) - job_ns) / static_cast<double>(b - a));
  if (sys.cpu_steal_ns.size() == n)
    out.steal_cores = std::min(out.busy_cores, std::max(0.0, between(sys.cpu_steal_ns) / static_cast<double>(b - a)));
  return out;
}

SystemStats MeasureSystem(const Trace& trace, const std::vector<LoaderAnalysis>& loaders) {
  SystemStats out;
  const auto& sys = trace.system;
  out.memory_bytes = static_cast<double>(MemoryBytes(trace.header));
  for (const auto& l : loaders) out.dataset_bytes = std::max(out.dataset_bytes, l.config.DatasetBytes());
  size_t n = sys.t_ns.size();
  if (n >= 2 && sys.t_ns.back() > sys.t_ns.front()) {
    out.available = true;
    out.seconds = (sys.t_ns.back() - sys.t_ns.front()) * kNs;
    auto delta = [&](const std::vector<uint64_t>& v) { return v.size() == n ? static_cast<double>(v.back()) - v.front() : 0.0; };
    double total = delta(sys.cpu_total_ns);
    out.machine_cpu_fraction = total > 0 ? delta(sys.cpu_busy_ns) / total : 0;
    out.steal_measured = sys.cpu_steal_ns.size() == n;
    out.steal_fraction = total > 0 ? delta(sys.cpu_steal_ns) / total : 0;
    out.disk_read_bytes = delta(sys.disk_read_bytes);
    out.disk_read_bytes_per_s = out.disk_read_bytes / out.seconds;
    if (sys.page_cache_bytes.size() == n) {
      out.page_cache_start = static_cast<double>(sys.page_cache_bytes.front());
      out.page_cache_end = static_cast<double>(sys.page_cache_bytes.back());
      out.page_cache_max = static_cast<double>(*std::max_element(sys.page_cache_bytes.begin(), sys.page_cache_bytes.end()));
    }
    if (sys.mem_available_bytes.size() == n)
      out.mem_available_min = static_cast<double>(*std::min_element(sys.mem_available_bytes.begin(), sys.mem_available_bytes.end()));
  }
  // Job CPU: each process's cumulative CPU over the sampled time; RSS summed per tick index.
  double job_cpu_s = 0;
  uint64_t first = std::numeric_limits<uint64_t>::max(), last = 0;
  std::map<uint64_t, double> rss_at;
  for (const auto& p : trace.process_series) {
    if (p.t_ns.size() < 2 || p.cpu_ns.size() != p.t_ns.size()) continue;
    job_cpu_s += (static_cast<double>(p.cpu_ns.back()) - p.cpu_ns.front()) * kNs;
    first = std::min(first, p.t_ns.front());
    last = std::max(last, p.t_ns.back());
    if (p.rss_bytes.size() == p.t_ns.size())
      for (size_t i = 0; i < p.t_ns.size(); ++i) rss_at[p.t_ns[i] / 1000000] += p.rss_bytes[i];
  }
  for (const auto& [t, rss] : rss_at) out.job_rss_max = std::max(out.job_rss_max, rss);
  if (trace.header.online_cores > 0)
    out.unusable_cores = std::max(0.0, trace.header.online_cores - UsableCores(trace.header));
  if (const auto outside = OutsideBusyCores(trace)) {
    out.outside_busy_cores = outside->busy_cores;
    out.outside_busy_measured = true;
    out.outside_steal_cores = outside->steal_cores;
  }
  if (last > first) {
    out.job_cpu_cores = job_cpu_s / ((last - first) * kNs);
    const double cores = UsableCores(trace.header);
    out.job_cpu_fraction = cores > 0 ? out.job_cpu_cores / cores : 0;
  }
  double room = std::max(out.mem_available_min + out.page_cache_start, static_cast<double>(trace.header.page_cache_bytes));
  if (room <= 0 || room > out.memory_bytes) room = out.memory_bytes;  // a memory cgroup's limit bounds it
  out.dataset_fits_in_memory = out.dataset_bytes > 0 && room > 0 && out.dataset_bytes < 0.9 * room;
  return out;
}

// The hook's config "uncaught_error" (scope: the loader whose iterator the
// traceback passed through, 0 = none) with "uncaught_error_batch" and the
// loader's "name" of the same process and scope.
std::vector<UncaughtError> UncaughtErrors(const Trace& trace) {
  std::vector<UncaughtError> errors;
  for (const auto& c : trace.configs) {
    if (c.key != "uncaught_error" || c.type != ConfigValue::Type::kStr) continue;
    UncaughtError e;
    e.pid = c.pid;
    e.message = c.str;
    if (e.message.starts_with("[thread ")) {  // "[thread NAME] message"
      if (const size_t close = e.message.find("] "); close != std::string::npos) {
        e.thread = e.message.substr(8, close - 8);
        e.message = e.message.substr(close + 2);
      }
    }
    if (c.scope != 0) {
      e.loader = "loader" + std::to_string(c.scope);
      for (const auto& d : trace.configs) {
        if (d.pid != c.pid || d.scope != c.scope) continue;
        if (d.key == "name" && d.type == ConfigValue::Type::kStr && !d.str.empty()) e.loader = d.str;
        if (d.key == "uncaught_error_batch" && d.type == ConfigValue::Type::kU64 && d.u64 <= INT64_MAX)
          e.batch = static_cast<int64_t>(d.u64);
      }
    }
    errors.push_back(std::move(e));
  }
  std::stable_sort(errors.begin(), errors.end(), [](const auto& a, const auto& b) { return a.pid < b.pid; });
  return errors;
}

// "SIGSEGV" for 11; "signal 77" for one without a name.
std::string SignalName(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(signal);
}

DataQuality MeasureQuality(const Trace& trace) {
  DataQuality q;
  q.spans = trace.spans.size();
  uint64_t thread_drops = 0;
  std::set<std::string> clients;
  std::set<std::pair<uint32_t, uint64_t>> lanes;
  for (const auto& t : trace.threads) {
    // Saturating: a hand-made trace may carry any count; never wrap around.
    thread_drops = t.dropped > UINT64_MAX - thread_drops ? UINT64_MAX : thread_drops + t.dropped;
    lanes.insert({t.lane, t.lane_generation});
    switch (t.client) {
      case ClientKind::kC: clients.insert("c"); break;
      case ClientKind::kPythonCext: clients.insert("python-cext"); break;
      case ClientKind::kPythonCtypes: clients.insert("python-ctypes"); break;
    }
  }
  std::set<uint32_t> lane_ids;
  for (const auto& [lane, gen] : lanes) lane_ids.insert(lane);
  q.lanes_used = static_cast<uint32_t>(lane_ids.size());
  q.ring_lanes = trace.header.ring_lanes;
  q.dropped = thread_drops;
  if (trace.footer) {
    q.footer_present = true;
    // The launcher's own total: it equals the sum of the per-thread counts
    // (both are the consumer's bounded figures), and it is the figure
    // `stallprof run` printed.
    q.dropped = std::max(q.dropped, trace.footer->dropped);
    q.laneless_dropped = trace.footer->dropped > thread_drops ? trace.footer->dropped - thread_drops : 0;
    q.exit_code = trace.footer->exit_code;
    q.term_signal = trace.footer->term_signal;
    q.invalid_records = trace.footer->invalid_records;
  }
  q.uncaught_errors = UncaughtErrors(trace);
  q.dropped_share = q.spans + q.dropped ? static_cast<double>(q.dropped) / (q.spans + q.dropped) : 0;
  q.truncated = trace.truncated;
  q.clients.assign(clients.begin(), clients.end());
  q.clock_resolution_ns = trace.header.clock_resolution_ns;
  if (trace.header.clock_source == ClockSource::kTsc) {
    q.clock_source = "tsc";
    q.clock = fmt::format("TSC {:.3f} GHz converted to CLOCK_MONOTONIC", trace.header.tsc_hz / 1e9);
    if (trace.footer && trace.footer->tsc_drift_over_ns > 0) {
      const auto& f = *trace.footer;
      const double drift_per_s = static_cast<double>(f.tsc_drift_ns) / (static_cast<double>(f.tsc_drift_over_ns) / 1e9);
      q.clock += fmt::format(", drift {:+.0f} ns over {:.1f} s, worst error {} ns", static_cast<double>(f.tsc_drift_ns),
                             static_cast<double>(f.tsc_drift_over_ns) / 1e9, f.tsc_max_error_ns);
      if (std::abs(drift_per_s) > kMaxTscDriftNsPerS)
        q.clock_warning = fmt::format(
            "the TSC drifted from CLOCK_MONOTONIC by {:+.1f} us/s (bound {:.0f} us/s): its rate is not constant "
            "(or NTP slewed the clock); times were re-anchored at every drain, worst error {} ns",
            drift_per_s / 1e3, kMaxTscDriftNsPerS / 1e3, f.tsc_max_error_ns);
      if (f.tsc_max_error_ns > kMaxTscErrorNs && q.clock_warning.empty())
        q.clock_warning = fmt::format(
            "span times converted from the TSC may be off by up to {:.1f} us (bound {:.0f} us); rerun with "
            "STALLPROF_CLOCK=monotonic",
            static_cast<double>(f.tsc_max_error_ns) / 1e3, static_cast<double>(kMaxTscErrorNs) / 1e3);
    }
  }
  return q;
}

}  // namespace

std::string DescribeEnding(const DataQuality& q) {
  std::string out;
  if (q.term_signal != 0)
    out = fmt::format("the profiled command was killed by {} (signal {})", SignalName(q.term_signal), q.term_signal);
  else if (q.exit_code != 0)
    out = fmt::format("the profiled command exited with code {}", q.exit_code);
  constexpr size_t kShown = 3;  // a job of many ranks that all failed alike: the first few say it
  for (size_t i = 0; i < q.uncaught_errors.size() && i < kShown; ++i) {
    const auto& e = q.uncaught_errors[i];
    out += fmt::format("{}pid {}{}{} raised {}", out.empty() ? "" : "; ", e.pid,
                       e.rank >= 0 ? fmt::format(" (rank {})", e.rank) : "",
                       e.thread.empty() ? "" : fmt::format(" (thread {})", e.thread), e.message);
    if (!e.loader.empty())
      out += e.batch >= 0 ? fmt::format(", waiting for batch {} of loader {}", e.batch, e.loader)
                          : fmt::format(", in loader {}", e.loader);
  }
  if (q.uncaught_errors.size() > kShown)
    out += fmt::format("; {} more uncaught exceptions", q.uncaught_errors.size() - kShown);
  return out;
}

std::string EndingLine(const DataQuality& q) {
  const std::string ending = q.footer_present ? DescribeEnding(q) : "";
  if (ending.empty()) return "";
  if (q.exit_code == 0 && q.term_signal == 0) return "uncaught exception, the job went on: " + ending;
  return "ended: " + ending + " (the figures cover the run up to it)";
}

std::string LostRecordsLine(const DataQuality& q) {
  if (q.dropped == 0) return "";
  std::vector<std::string> causes;
  if (q.laneless_dropped > 0)
    causes.push_back(fmt::format("{} from threads that found all {} ring lanes taken (`stallprof run --lanes {}`)",
                                 q.laneless_dropped, q.ring_lanes, sp_suggested_lanes(q.ring_lanes)));
  if (q.dropped > q.laneless_dropped)
    causes.push_back(fmt::format("{} in full lanes (a larger `stallprof run --ring-size`)", q.dropped - q.laneless_dropped));
  std::string out = fmt::format("{} records lost ({:.1f}% of the run's): ", q.dropped, q.dropped_share * 100);
  for (size_t i = 0; i < causes.size(); ++i) out += (i ? ", " : "") + causes[i];
  return out + "; the figures cover the records that arrived, and counts read from them (samples from getitem spans, "
               "batches per worker) may be off";
}

Verdict Classify(double stall_fraction) {
  if (stall_fraction >= model::kHighlyInputBound) return Verdict::kHighlyInputBound;
  if (stall_fraction >= model::kModeratelyInputBound) return Verdict::kModeratelyInputBound;
  return Verdict::kNotInputBound;
}

const char* ToString(Verdict verdict) {
  switch (verdict) {
    case Verdict::kHighlyInputBound: return "HIGHLY input-bound";
    case Verdict::kModeratelyInputBound: return "MODERATELY input-bound";
    case Verdict::kNotInputBound: return "not input-bound";
  }
  return "?";
}

double Quantile(std::span<const double> sorted, double q) {
  if (sorted.empty()) return 0;
  double pos = q * (sorted.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, sorted.size() - 1);
  double frac = pos - lo;
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

namespace {

// A double's place in the order: its bits, flipped so that their order as
// unsigned integers is the numbers' order (-0 before +0; NaN at the ends, by
// sign, so that every value has a place).
uint64_t OrderKey(double v) {
  const uint64_t bits = std::bit_cast<uint64_t>(v);
  return (bits >> 63) ? ~bits : bits | (uint64_t{1} << 63);
}

bool KeyLess(double a, double b) { return OrderKey(a) < OrderKey(b); }

// SelectRanks' buckets: the values' key range split in 4096, so that the
// tallies stay in the L1 cache and cost little to clear.
constexpr int kSelectBits = 12;
constexpr size_t kSelectBuckets = size_t{1} << kSelectBits;

// How many of `values` fall in each bucket; two tallies, odd and even
// values, summed at the end: values of one bucket in a row would otherwise
// wait on each other's increment.
template <typename BucketOf>
std::array<uint32_t, kSelectBuckets> CountBuckets(std::span<const double> values, BucketOf bucket_of) {
  std::array<uint32_t, kSelectBuckets> count{}, other{};
  size_t i = 0;
  for (; i + 1 < values.size(); i += 2) {
    ++count[bucket_of(values[i])];
    ++other[bucket_of(values[i + 1])];
  }
  if (i < values.size()) ++count[bucket_of(values[i])];
  for (size_t k = 0; k < kSelectBuckets; ++k) count[k] += other[k];
  return count;
}

// Into out[i], the ranks[i]-th smallest of `values` (ranks ascending, each
// below values.size()), exactly as a sort would place it, given the least and
// greatest of their order keys: a radix selection over the key range. One
// pass counts the values in 4096 equal slices of [min_key, max_key] (for
// durations, about a 4096th of their logarithmic range each), one more
// gathers the few slices holding a wanted rank, and those are selected the
// same way within their own range (at least 2048 times narrower), or by
// nth_element once small. Two linear passes where a sort (or nth_element's
// mispredicted branches on every value) cost about as much as decoding the
// spans; the range, not fixed key bits, so that clustered values spread over
// the slices and a slice of equal values ends the search at once.
void SelectRanks(std::span<const double> values, std::span<const size_t> ranks, std::span<double> out,
                 uint64_t min_key, uint64_t max_key) {
  constexpr size_t kSmall = 2048;
  if (min_key == max_key) {  // one value, repeated (a key is the value's bits)
    for (size_t i = 0; i < ranks.size(); ++i) out[i] = values[ranks[i]];
    return;
  }
  // Up to 7 ranks: the gather below keeps a place per wanted bucket on the stack.
  if (values.size() <= kSmall || ranks.size() > 7) {
    HugeVector<double> copy(values.begin(), values.end());
    size_t from = 0;
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (ranks[i] >= from) {
        std::nth_element(copy.begin() + static_cast<ptrdiff_t>(from), copy.begin() + static_cast<ptrdiff_t>(ranks[i]),
                         copy.end(), KeyLess);
        from = ranks[i] + 1;
      }
      out[i] = copy[ranks[i]];
    }
    return;
  }
  const int width = std::bit_width(max_key - min_key);
  const int shift = width > kSelectBits ? width - kSelectBits : 0;
  auto bucket_of = [min_key, shift](double v) { return static_cast<size_t>((OrderKey(v) - min_key) >> shift); };
  const std::array<uint32_t, kSelectBuckets> count = CountBuckets(values, bucket_of);
  // Each rank's bucket and its rank within it; buckets numbered 1.. in `slot`.
  std::array<uint8_t, kSelectBuckets> slot{};
  std::vector<size_t> bucket_first;  // rank of each wanted bucket's first value
  std::vector<size_t> bucket_of_slot;
  std::vector<std::pair<size_t, size_t>> wanted(ranks.size());  // (slot - 1, rank within the bucket)
  size_t below = 0, b = 0;
  for (size_t i = 0; i < ranks.size(); ++i) {
    while (below + count[b] <= ranks[i]) below += count[b++];
    if (slot[b] == 0) {
      bucket_first.push_back(below);
      bucket_of_slot.push_back(b);
      slot[b] = static_cast<uint8_t>(bucket_first.size());
    }
    wanted[i] = {slot[b] - 1u, ranks[i] - below};
  }
  // The wanted buckets' values, gathered one after another into `pool`
  // without a branch per value (whether a value is wanted is a coin toss
  // where a bucket holds half of them): every value is written, at its
  // bucket's next place or, unwanted, at a last place that does not move.
  std::array<size_t, 8> begin{}, next{};
  size_t total = 0;
  for (size_t g = 0; g < bucket_first.size(); ++g) {
    begin[g + 1] = next[g + 1] = total;
    total += count[bucket_of_slot[g]];
  }
  next[0] = total;
  HugeVector<double> pool;
  pool.reserve(total + 1);
  pool.resize(total + 1);
  double* const to = pool.data();
  for (double v : values) {
    const uint8_t s = slot[bucket_of(v)];
    to[next[s]] = v;
    next[s] += s != 0;
  }
  // Each bucket's ranks, in order, selected within it.
  for (size_t g = 0; g < bucket_first.size(); ++g) {
    const std::span<const double> gathered(to + begin[g + 1], next[g + 1] - begin[g + 1]);
    std::vector<size_t> local;
    std::vector<size_t> which;
    for (size_t i = 0; i < ranks.size(); ++i)
      if (wanted[i].first == g) {
        local.push_back(wanted[i].second);
        which.push_back(i);
      }
    uint64_t lo = ~uint64_t{0}, hi = 0;
    for (double v : gathered) {
      lo = std::min(lo, OrderKey(v));
      hi = std::max(hi, OrderKey(v));
    }
    std::vector<double> found(local.size());
    SelectRanks(gathered, local, found, lo, hi);
    for (size_t j = 0; j < which.size(); ++j) out[which[j]] = found[j];
  }
}

}  // namespace

Summary Summarize(std::vector<double> values) { return SummarizeInPlace(values); }

// Quantile() of the sorted values without sorting them: a summary needs three
// order statistics and their neighbours, and Summarize runs on every
// iteration's step, wait and compute time, whole run and steady state; sorting
// them was the analysis's largest cost after decoding.
Summary SummarizeInPlace(std::span<double> values) {
  Summary s;
  const size_t n = values.size();
  if (n == 0) return s;
  s.count = n;
  // The total and the ends (by the order key, as the selection orders them).
  uint64_t min_key = ~uint64_t{0}, max_key = 0;
  for (double v : values) {
    s.total += v;
    const uint64_t key = OrderKey(v);
    min_key = std::min(min_key, key);
    max_key = std::max(max_key, key);
  }
  auto value_of = [](uint64_t key) { return std::bit_cast<double>((key >> 63) ? key & ~(uint64_t{1} << 63) : ~key); };
  s.min = value_of(min_key);
  s.max = value_of(max_key);
  s.mean = s.total / static_cast<double>(n);
  // Each quantile's order statistic and the next (Quantile's lo and hi); for
  // few values they repeat or interleave, so selected in ascending order.
  const double qs[] = {0.50, 0.90, 0.99};
  std::array<size_t, 6> ranks;
  for (size_t i = 0; i < 3; ++i) {
    const size_t lo = static_cast<size_t>(std::floor(qs[i] * static_cast<double>(n - 1)));
    ranks[2 * i] = lo;
    ranks[2 * i + 1] = std::min(lo + 1, n - 1);
  }
  std::array<size_t, 6> ascending = ranks;
  std::sort(ascending.begin(), ascending.end());
  std::array<double, 6> selected;
  SelectRanks(values, ascending, selected, min_key, max_key);
  auto at = [&](size_t rank) { return selected[std::lower_bound(ascending.begin(), ascending.end(), rank) - ascending.begin()]; };
  double* quantile[] = {&s.p50, &s.p90, &s.p99};
  for (size_t i = 0; i < 3; ++i) {
    const double pos = qs[i] * static_cast<double>(n - 1);
    const double lo = at(ranks[2 * i]), hi = at(ranks[2 * i + 1]);
    *quantile[i] = lo + (hi - lo) * (pos - std::floor(pos));
  }
  return s;
}

double TimeOutsideEpochs(const TraceAnalysis& analysis) {
  const auto& c = analysis.coverage;
  const double outside = c.between_s + c.after_s;
  return outside >= 1.0 && outside >= c.in_epochs_s ? outside : 0;
}

std::string DatasetMemoryNote(const TraceAnalysis& analysis) {
  const auto& s = analysis.system;
  if (s.dataset_bytes == 0) return "";
  const std::string size = FormatBytes(static_cast<double>(s.dataset_bytes));
  if (!s.dataset_fits_in_memory) return fmt::format("the dataset ({}) does not fit in the memory available for caching", size);
  auto stalled = [](const LoaderAnalysis& l) {
    const Account& a = l.account_all;
    return a.available && a.wall_s > 0 && a.Seconds(Cause::kStorage) >= 0.01 * a.wall_s;
  };
  const auto& loaders = analysis.loaders;
  if (std::none_of(loaders.begin(), loaders.end(), stalled)) {
    // Memory served it unless an epoch's fetches read a tenth of it or more
    // from the device: then the device served it, ahead of the steps (workers
    // reading cold files while the step ran).
    double device = 0;
    for (const auto& l : loaders)
      device = std::max(device, l.complete_epoch_device_bytes_per_sample * static_cast<double>(l.config.dataset_len));
    if (device >= 0.1 * static_cast<double>(s.dataset_bytes))
      return fmt::format("the dataset ({}) fits in memory; an epoch's fetches read {} from the device, and storage "
                         "cost no loader 1% of its time: the reads kept ahead of the steps",
                         size, FormatBytes(device));
    return fmt::format("the dataset ({}) fits in memory, and storage cost no loader 1% of its time: memory served it", size);
  }
  if (std::all_of(loaders.begin(), loaders.end(), [&](const LoaderAnalysis& l) { return !stalled(l) || StoragePaidInFirstEpoch(l); }))
    return fmt::format("the dataset ({}) fits in memory, and the page cache held it after the first epoch, whose reads "
                       "were the fetch stalls: a longer run pays them once",
                       size);
  return fmt::format("the dataset ({}) fits in memory: caching it would remove fetch stalls", size);
}

namespace {
// When the run ended: as the command exited, not as the trace did (after the
// launcher's final drain and handoff timing: 1.2 s of a 3.7 s run); 0 without a footer.
uint64_t JobEndNs(const Trace& trace) {
  if (!trace.footer) return 0;
  return trace.footer->job_end_monotonic_ns ? trace.footer->job_end_monotonic_ns : trace.footer->end_monotonic_ns;
}
}  // namespace

namespace internal {

uint32_t MostAtOnce(std::vector<std::pair<uint64_t, uint64_t>> intervals) {
  // Sweep the ends in time order; a start at the instant another ends counts
  // as overlapping (starts sort before ends at equal times).
  std::vector<std::pair<uint64_t, int>> ends;
  ends.reserve(2 * intervals.size());
  for (auto [first, last] : intervals) {
    ends.emplace_back(first, -1);
    ends.emplace_back(std::max(first, last), +1);
  }
  std::sort(ends.begin(), ends.end());
  uint32_t now = 0, most = 0;
  for (auto [t, kind] : ends) {
    if (kind < 0) most = std::max(most, ++now);
    else --now;
  }
  return most;
}

double SeriesAt(const std::vector<uint64_t>& t_ns, const std::vector<uint64_t>& values, uint64_t t) {
  size_t n = std::min(t_ns.size(), values.size());
  if (n == 0) return 0;
  if (t <= t_ns[0]) return static_cast<double>(values[0]);
  if (t >= t_ns[n - 1]) return static_cast<double>(values[n - 1]);
  size_t hi = std::upper_bound(t_ns.begin(), t_ns.begin() + n, t) - t_ns.begin();
  size_t lo = hi - 1;
  double span = static_cast<double>(t_ns[hi] - t_ns[lo]);
  double frac = span > 0 ? (t - t_ns[lo]) / span : 0;
  return values[lo] + (static_cast<double>(values[hi]) - values[lo]) * frac;
}

Result<TraceAnalysis> AnalyzeCore(const Trace& trace, const AnalysisOptions& options,
                                  const std::vector<StageTotals>& extra_stages) {
  const auto& s = trace.spans;
  const uint32_t wait_name = NameId(trace, names::kWait);
  const uint32_t epoch_name = NameId(trace, names::kEpoch);
  const uint32_t kept_epoch_name = NameId(trace, names::kKeptEpoch);
  const uint32_t loop_end_name = NameId(trace, names::kLoopEnd);
  const uint32_t fetch_name = NameId(trace, names::kFetch);
  const uint32_t getitem_name = NameId(trace, names::kGetitem);
  const uint32_t epoch_end_name = NameId(trace, names::kEpochEnd);
  const uint32_t shutdown_name = NameId(trace, names::kShutdown);
  const uint32_t sampler_first_name = NameId(trace, names::kSamplerFirst);
  const uint32_t worker_start_name = NameId(trace, names::kWorkerStart);
  const uint32_t read_storage_name = NameId(trace, names::kReadStorage);
  const uint32_t read_calls_name = NameId(trace, names::kReadCalls);
  const uint32_t system_cpu_name = NameId(trace, names::kSystemCpu);
  const uint32_t gil_probe_name = NameId(trace, names::kGilProbe);
  const uint32_t handout_name = NameId(trace, names::kHandout);
  std::unordered_map<uint32_t, ThreadReads> reads_of_thread;
  SpanIndices gil_probes;
  const std::vector<bool> calibration = internal::CalibrationNames(trace);

  std::vector<LoaderSpans> loader_spans;
  std::unordered_map<uint64_t, int> loader_of_key;
  auto loader_for = [&](uint32_t pid, uint16_t scope) -> LoaderSpans& {
    auto [it, inserted] = loader_of_key.try_emplace(LoaderKey(pid, scope), static_cast<int>(loader_spans.size()));
    if (inserted) {
      loader_spans.emplace_back();
      loader_spans.back().pid = pid;
      loader_spans.back().scope = scope;
      loader_spans.back().scopes = {scope};
      // Room for every span: address space only until written, and no copy as it grows.
      loader_spans.back().waits.reserve(s.size());
    }
    return loader_spans[it->second];
  };
  std::unordered_map<uint16_t, SpanIndices> fetches_of_scope;
  std::vector<StageAccumulator> accumulators;
  std::unordered_map<internal::StageKey, uint32_t, internal::StageKeyHash> accumulator_of;
  internal::StageKey last_key{std::numeric_limits<uint64_t>::max(), 0};
  uint32_t last_accumulator = 0;
  auto accumulator_for = [&](uint32_t thread, uint32_t name, uint16_t scope, StagePlace place) -> StageAccumulator& {
    const internal::StageKey key{(uint64_t{thread} << 32) | name, uint32_t{static_cast<uint8_t>(place)} << 16 | scope};
    if (!(key == last_key)) {
      auto [it, inserted] = accumulator_of.try_emplace(key, static_cast<uint32_t>(accumulators.size()));
      if (inserted) {
        accumulators.emplace_back();
        accumulators.back().thread = thread;
        accumulators.back().name = name;
        accumulators.back().scope = scope;
        accumulators.back().place = place;
      }
      last_key = key;
      last_accumulator = it->second;
    }
    return accumulators[last_accumulator];
  };
  // User stages are placed inside or outside their thread's fetches (as the
  // streaming decoder does before folding them).
  std::vector<bool> user_stage(trace.strings.size());
  for (size_t id = 0; id < trace.strings.size(); ++id) user_stage[id] = IsUserStageName(trace.strings[id]);
  StagePlacer placer;
  auto place = [&](uint32_t thread, const PendingStage& p, StagePlace where, uint16_t scope) {
    AddToTotals(accumulator_for(thread, p.name, scope, where), p);
  };

  const size_t n = s.size();
  for (size_t i = 0; i < n; ++i) {
    const uint32_t name = s.name[i];
    const SpanKind kind = s.kind[i];
    const uint32_t thread = s.thread[i];
    if (thread >= trace.threads.size()) continue;  // LoadTrace validates; stay safe on hand-built traces
    if (name == wait_name && kind == SpanKind::kSpan) {
      LoaderSpans& l = loader_for(trace.threads[thread].pid, s.scope[i]);
      l.waits.push_back(static_cast<uint32_t>(i));
      if (!trace.threads[thread].IsMain()) l.off_main_thread = thread + 1;
      placer.Wait(thread, s.scope[i], place);
      continue;
    }
    if (name == epoch_name) {
      loader_for(trace.threads[thread].pid, s.scope[i]).epochs.push_back(static_cast<uint32_t>(i));
      placer.Wait(thread, s.scope[i], place);  // a span or (older hooks) an instant: a next() call either way
      continue;
    }
    if (name == kept_epoch_name && kind == SpanKind::kSpan) {
      loader_for(trace.threads[thread].pid, s.scope[i]).kept_epochs.push_back(static_cast<uint32_t>(i));
      continue;
    }
    if (name == loop_end_name && kind == SpanKind::kSpan) {
      loader_for(trace.threads[thread].pid, s.scope[i]).loop_ends.push_back(static_cast<uint32_t>(i));
      continue;
    }
    if (name == shutdown_name && kind == SpanKind::kSpan) {
      loader_for(trace.threads[thread].pid, s.scope[i]).shutdowns.push_back(static_cast<uint32_t>(i));
      placer.Wait(thread, s.scope[i], place);
      continue;
    }
    if (name == sampler_first_name && kind == SpanKind::kSpan) {
      loader_for(trace.threads[thread].pid, s.scope[i]).sampler_firsts.push_back(static_cast<uint32_t>(i));
      continue;
    }
    if (name == epoch_end_name) {
      loader_for(trace.threads[thread].pid, s.scope[i]).epoch_ends.push_back(static_cast<uint32_t>(i));
      placer.Wait(thread, s.scope[i], place);  // a span or (older hooks) an instant: a next() call either way
      continue;
    }
    if (kind != SpanKind::kSpan || name == worker_start_name || name == wait_name) continue;
    if (name < calibration.size() && calibration[name]) continue;  // the hook timing itself at start
    if (name == read_storage_name || name == read_calls_name || name == system_cpu_name) {
      // Measurements of a fetch span, not a pipeline stage.
      auto& reads = reads_of_thread[thread];
      (name == read_storage_name ? reads.storage : name == read_calls_name ? reads.calls : reads.system)
          .push_back(static_cast<uint32_t>(i));
      continue;
    }
    if (name == handout_name) {  // a prefetch thread's hand-off: its loader's compute, not a stage
      loader_for(trace.threads[thread].pid, s.scope[i]).handouts.push_back(static_cast<uint32_t>(i));
      continue;
    }
    if (name == gil_probe_name) {  // a measurement of a fetch, not a stage
      gil_probes.push_back(static_cast<uint32_t>(i));
      continue;
    }
    const PendingStage span{s.start_ns[i], s.duration_ns[i], s.cpu_ns[i], name, s.scope[i], s.has_cpu[i] != 0};
    if (name < user_stage.size() && user_stage[name]) {
      placer.Stage(thread, span, place);
      continue;
    }
    if (name == fetch_name) {
      auto [fetches, inserted] = fetches_of_scope.try_emplace(s.scope[i]);
      if (inserted) fetches->second.reserve(n);  // as the waits
      fetches->second.push_back(static_cast<uint32_t>(i));
      placer.Fetch(thread, s.start_ns[i], s.scope[i], place);
    }
    AddToTotals(accumulator_for(thread, name, s.scope[i], StagePlace::kUnplaced), span);
  }
  placer.Finish(place);

  accumulators.insert(accumulators.end(), extra_stages.begin(), extra_stages.end());
  for (auto& [thread, reads] : reads_of_thread)
    for (auto* v : {&reads.storage, &reads.calls, &reads.system})
      std::sort(v->begin(), v->end(), [&](uint32_t a, uint32_t b) { return s.start_ns[a] < s.start_ns[b]; });

  // A loader is a (process, scope) whose next() was observed at least once.
  std::vector<LoaderSpans> loaders_seen;
  for (auto& l : loader_spans)
    if (!l.waits.empty()) loaders_seen.push_back(std::move(l));
  if (loaders_seen.empty()) {
    std::string base = trace.path.empty() ? std::string("the trace") : trace.path;
    uint64_t total = n;
    for (const auto& st : extra_stages) total += st.count;
    // A program that failed before its first batch is the likelier cause.
    std::string ended;
    if (trace.truncated)  // cut short before its first batch was written (a copy interrupted, a disk that filled)
      ended = fmt::format("; the file is truncated: it ends inside a chunk after {} bytes, with no footer, so the "
                          "iterations may have been in the part that is missing",
                          trace.bytes);
    else if (!trace.footer)
      ended = "; the file has no footer: the run that wrote it did not finish (killed with stallprof itself?)";
    else if (trace.footer->term_signal != 0 || trace.footer->exit_code != 0)
      ended = "; before it took a batch, " + DescribeEnding(MeasureQuality(trace)) + " (see its output)";
    // A program that ran to its end with the hook loaded and never iterated
    // a DataLoader feeds its steps some other way: nothing waited on one.
    std::set<uint32_t> hooked;
    for (const auto& th : trace.threads)
      if (th.client != ClientKind::kC) hooked.insert(th.pid);
    if (total == 0 && ended.empty() && trace.footer && !hooked.empty()) {
      const uint64_t end = JobEndNs(trace);
      const double seconds = end > trace.header.start_monotonic_ns ? (end - trace.header.start_monotonic_ns) * kNs : 0;
      return UnsupportedError(fmt::format(
          "no DataLoader found in {}: the profiled command ran {} and exited 0 with stallprof's hook loaded in {} Python "
          "process{}, but never took a batch from a torch.utils.data.DataLoader, so no step waited on one and there is "
          "no input stall to analyze (a loop that slices tensors it already holds has none); stallprof measures "
          "DataLoader pipelines (or dataloader.* spans emitted through the C API)",
          base, FormatSeconds(seconds), hooked.size(), hooked.size() == 1 ? "" : "es"));
    }
    return UnsupportedError("no DataLoader found in " + base + ": it holds " +
                            (total == 0 ? std::string("no spans")
                                        : std::to_string(total) + (total == 1 ? " span" : " spans") + " but no '" +
                                              names::kWait + "' iterations") +
                            ", so there are no steps to analyze" + ended +
                            "; record a PyTorch training script with "
                            "'stallprof run -- python3 train.py' (or emit dataloader.* spans from the C API)");
  }
  MergeRecreatedLoaders(trace, loaders_seen);
  loader_of_key.clear();
  std::unordered_map<uint16_t, int> only_loader_of_scope;
  std::unordered_map<uint16_t, int> loaders_with_scope;
  for (size_t i = 0; i < loaders_seen.size(); ++i)
    for (const uint16_t scope : loaders_seen[i].scopes) {
      loader_of_key[LoaderKey(loaders_seen[i].pid, scope)] = static_cast<int>(i);
      loaders_with_scope[scope]++;
      only_loader_of_scope[scope] = static_cast<int>(i);
    }
  for (const auto& [scope, count] : loaders_with_scope)
    if (count > 1) only_loader_of_scope.erase(scope);
  for (auto& l : loaders_seen) l.fetches.reserve(n);  // as the waits
  for (auto& [scope, fetches] : fetches_of_scope) {
    std::unordered_map<uint32_t, int> loader_of_thread;
    for (uint32_t f : fetches) {
      uint32_t thread = s.thread[f];
      auto [it, inserted] = loader_of_thread.try_emplace(thread, -1);
      if (inserted)
        it->second = FindLoaderOfFetch(trace, loader_of_key, only_loader_of_scope, trace.threads[thread].pid, scope);
      if (it->second >= 0) loaders_seen[it->second].fetches.push_back(f);
    }
  }

  TraceAnalysis out;
  out.path = trace.path;
  out.hostname = trace.header.hostname;
  out.start_monotonic_ns = trace.header.start_monotonic_ns;
  out.start_realtime_ns = trace.header.start_realtime_ns;
  out.usable_cores = trace.header.usable_cores;
  if (CpuQuotaLimits(trace.header)) out.cpu_quota_cores = trace.header.cpu_quota_cores;
  uint64_t end = JobEndNs(trace);
  const double counter_share = CounterShare(trace);
  const bool sampled = counter_share < 1;
  // Every loader's iterations first: a loader whose whole epochs run inside
  // another's compute (a validation pass every N steps) is taken out of it.
  std::vector<LoaderAnalysis> built(loaders_seen.size());
  std::vector<SpanIndices> sorted_waits(loaders_seen.size());
  std::vector<std::span<const uint32_t>> waits_of(loaders_seen.size());
  std::vector<std::vector<uint64_t>> epoch_starts_of(loaders_seen.size());
  std::vector<CounterEstimator> wait_counters_of;
  wait_counters_of.reserve(loaders_seen.size());
  for (size_t i = 0; i < loaders_seen.size(); ++i) {
    const auto& l = loaders_seen[i];
    LoaderAnalysis& loader = built[i];
    loader.pid = l.pid;
    loader.scope = l.scope;
    loader.scopes = l.scopes;
    if (const ProcessInfo* p = trace.FindProcess(l.pid)) loader.rank = p->rank;
    loader.config = ReadConfig(trace, l.pid, l.scopes);
    waits_of[i] = WaitsByStart(s, l.waits, sorted_waits[i]);
    epoch_starts_of[i] = EpochStarts(s, l);
    const CounterEstimator& wait_counters = wait_counters_of.emplace_back(s, l.waits, sampled, epoch_starts_of[i]);
    BuildIterations(trace, l, waits_of[i], wait_counters, options.warmup, loader);
  }
  TakeOutNestedLoaders(trace, loaders_seen, built);
  for (size_t i = 0; i < loaders_seen.size(); ++i) {
    const auto& l = loaders_seen[i];
    LoaderAnalysis loader = std::move(built[i]);
    const CounterEstimator& wait_counters = wait_counters_of[i];
    const CounterEstimator fetch_counters(s, l.fetches, sampled, epoch_starts_of[i]);
    loader.counters.share = counter_share;
    loader.counters.waits = wait_counters.Sums();
    loader.counters.fetches = fetch_counters.Sums();
    const std::span<const uint32_t> waits = waits_of[i];
    FillSummaries(loader);
    FillEpochs(trace, loader);
    FillWorkers(trace, l.fetches, fetch_counters, loader);
    MeasureMainStep(trace, waits, wait_counters, loader);
    FillFetchReads(trace, l.fetches, reads_of_thread, loader);
    InferMissingConfig(trace, loader);
    FillPrefetch(trace, l.fetches, loader);
    CountGilProbes(trace, gil_probes, l.fetches, loader);
    MeasurePrefetchThread(trace, l, sampled, epoch_starts_of[i], loader);
    FillStages(trace, accumulators, fetch_name, sampled, loader);
    // Samples per batch from the getitem spans per fetch span: where the
    // config has no batch_size (e.g. a C client), and where an
    // IterableDataset's batches held fewer samples than its batch_size (each
    // worker ends its stream on a partial batch: 2 workers of 100 items in
    // batches of 32 make 8 batches and 200 samples an epoch, 256 by
    // batch_size). Only from a trace that lost no span, and not where each
    // item is a batch (batch_size=None: the hook measured the first batch).
    if (!loader.config.batch_size_known ||
        (loader.config.Iterable() && loader.config.batch_size_from.empty() && NoSpanLost(trace))) {
      uint64_t batches = 0, samples = 0;
      for (const auto& w : loader.workers) batches += w.batches;
      for (const auto& st : loader.stages)
        if (st.name == names::kGetitem) samples = st.count;
      const bool partial = loader.config.batch_size_known &&
                           static_cast<double>(samples) < static_cast<double>(batches) * loader.config.batch_size;
      if (batches > 0 && samples >= batches && (!loader.config.batch_size_known || partial)) {
        if (partial) loader.config.batch_size_set = loader.config.batch_size;
        loader.config.batch_size = static_cast<double>(samples) / batches;  // a mean: a batch sampler's batches vary
        loader.config.batch_size_from = "getitem spans";
        FillSummaries(loader);  // which batches are partial, so the steady state, follows the batch size
        FillEpochs(trace, loader);
        loader.stages.clear();
        FillStages(trace, accumulators, fetch_name, sampled, loader);
      }
    }
    MeasureWorkerSetup(accumulators, getitem_name, loader);
    internal::FillAccount(trace, FetchFacts(trace, l.fetches, fetch_counters, reads_of_thread), loader);
    loader.first_epoch = CompareFirstEpoch(loader.epochs, loader.account_all.available);
    if (!loader.iterations.empty()) end = std::max(end, loader.iterations.back().return_ns);
    out.loaders.push_back(std::move(loader));
  }
  std::sort(out.loaders.begin(), out.loaders.end(), [](const LoaderAnalysis& a, const LoaderAnalysis& b) {
    return std::tie(a.rank, a.pid, a.scope) < std::tie(b.rank, b.pid, b.scope);
  });
  NameApartSameNamedLoaders(out.loaders);
  out.duration_s = end > trace.header.start_monotonic_ns ? (end - trace.header.start_monotonic_ns) * kNs : 0;
  out.coverage = MeasureCoverage(trace, out.loaders, trace.header.start_monotonic_ns, end);
  out.system = MeasureSystem(trace, out.loaders);
  out.quality = MeasureQuality(trace);
  DescribeProcesses(trace, out);
  if (options.predict_advice) PredictAdvisedWorkers(trace, out);
  return out;
}

}  // namespace internal

Result<TraceAnalysis> Analyze(const Trace& trace, const AnalysisOptions& options) {
  return internal::AnalyzeCore(trace, options);
}

Result<TraceAnalysis> Analyze(const TraceDigest& digest, const AnalysisOptions& options) {
  auto core = internal::AnalyzeCore(digest.trace, options, digest.stages);
  if (!core.ok()) return core;
  // The quality figures count every span read, not only those kept.
  uint64_t folded = 0;
  for (const auto& st : digest.stages) folded += st.count;
  auto& q = core->quality;
  q.spans += folded;
  q.dropped_share = q.spans + q.dropped ? static_cast<double>(q.dropped) / (q.spans + q.dropped) : 0;
  return core;
}

int64_t ToRealtime(const TraceAnalysis& trace, uint64_t monotonic_ns) {
  return trace.start_realtime_ns + (static_cast<int64_t>(monotonic_ns) - static_cast<int64_t>(trace.start_monotonic_ns));
}

}  // namespace stallprof::analysis
