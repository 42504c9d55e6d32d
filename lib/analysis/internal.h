// Pieces shared by analysis.cpp and profile.cpp; not part of the contract.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <tuple>
#include <vector>

#include "analysis.h"
#include "model/model.h"
#include "trace/trace.h"

namespace stallprof::analysis::internal {

// Everything except the DS-Analyzer split (which needs the model, which needs
// the profiles built from this). Same failure as Analyze.
// `extra_stages`: totals of spans already folded away (LoadForAnalysis).
Result<TraceAnalysis> AnalyzeCore(const Trace& trace, const AnalysisOptions& options,
                                  const std::vector<StageTotals>& extra_stages = {});

// The model's view of one analyzed loader. kMeasured leaves out what the
// model fits to it by simulating the profiled configuration (the calibrated
// receive, the outside load: about 50 simulations), which only predictions need.
enum class ProfileFits { kFitted, kMeasured };
model::LoaderProfile BuildProfile(const Trace& trace, const TraceAnalysis& analysis, const LoaderAnalysis& loader,
                                  ProfileFits fits = ProfileFits::kFitted);

// Stage totals are kept per (thread, name, scope): a thread may serve two
// loaders (num_workers = 0), whose spans carry different scopes.
struct StageKey {
  uint64_t thread_and_name = 0;  // thread << 32 | name
  uint32_t scope = 0;            // StagePlace << 16 | scope
  bool operator==(const StageKey& o) const { return thread_and_name == o.thread_and_name && scope == o.scope; }
};
struct StageKeyHash {
  size_t operator()(const StageKey& k) const { return std::hash<uint64_t>()(k.thread_and_name * 65599u + k.scope); }
};

// Sorts `rows` by key(row), a uint64_t, stably (rows of equal keys keep their
// order): a least-significant-digit radix sort, a linear pass per byte of the
// key, skipped where every key has the same byte (the high bytes of times and
// durations mostly do), against ~log2(n) passes of comparisons, each a
// mispredicted branch. The digits' counts of all passes come from one read of
// the keys. Small inputs go to std::stable_sort.
template <typename T, typename KeyOf>
void RadixSortBy(HugeVector<T>& rows, KeyOf key) {
  const size_t n = rows.size();
  if (n < 1024) {
    std::stable_sort(rows.begin(), rows.end(), [&](const T& a, const T& b) { return key(a) < key(b); });
    return;
  }
  std::vector<std::array<size_t, 256>> counts(8, std::array<size_t, 256>{});
  for (const T& row : rows) {
    const uint64_t k = key(row);
    for (int pass = 0; pass < 8; ++pass) counts[pass][(k >> (8 * pass)) & 0xff]++;
  }
  HugeVector<T> spare;
  for (int shift = 0; shift < 64; shift += 8) {
    auto& count = counts[shift / 8];
    if (count[(key(rows[0]) >> shift) & 0xff] == n) continue;  // one digit for all: already in order
    size_t at = 0;
    for (size_t& c : count) {
      const size_t here = c;
      c = at;
      at += here;
    }
    spare.resize(n);
    for (const T& row : rows) spare[count[(key(row) >> shift) & 0xff]++] = row;
    rows.swap(spare);
  }
}

// A loader's fetch spans by batch index (a fetch span's arg: the batch index in
// its epoch), for "the fetch that produced the batch this next() returned":
// one sorted vector instead of a container per batch (a trace has millions).
class FetchesByBatch {
 public:
  // Adds a fetch; among fetches of one batch with the same start, the first added wins.
  void Add(uint64_t batch, uint64_t start_ns, uint32_t id) {
    rows_.push_back({batch, start_ns, static_cast<uint32_t>(rows_.size()), id});
  }
  // Call once after the last Add, before any lookup.
  void Sort() {
    auto by_start = [](const Row& a, const Row& b) { return std::tie(a.start_ns, a.order) < std::tie(b.start_ns, b.order); };
    // Batch indices count from 0 in each epoch, so they are dense: where they
    // are, the rows of batch b start at first_row_[b] (one load, not a binary
    // search over every fetch of the run per lookup), and the rows are put in
    // batch order by counting, into a second buffer (a stable scatter: in
    // place, following cycles of swaps, each step was a cache miss), then each
    // batch's few rows sorted by start where they are not already (callers add
    // in start order, mostly): the order of one sort by (batch, start, order),
    // without its log2(rows) passes over every row.
    first_row_.clear();
    uint64_t max_batch = 0;
    for (const Row& r : rows_) max_batch = std::max(max_batch, r.batch);
    if (rows_.empty() || max_batch > 4 * rows_.size() + 1024) {
      std::sort(rows_.begin(), rows_.end(), [&](const Row& a, const Row& b) {
        return a.batch != b.batch ? a.batch < b.batch : by_start(a, b);
      });
      return;
    }
    first_row_.assign(max_batch + 2, 0);
    for (const Row& r : rows_) first_row_[r.batch + 1]++;
    for (size_t b = 1; b < first_row_.size(); ++b) first_row_[b] += first_row_[b - 1];
    HugeVector<uint32_t> next(first_row_.begin(), first_row_.end() - 1);  // per batch: its next free row
    HugeVector<Row> by_batch(rows_.size());
    for (const Row& r : rows_) by_batch[next[r.batch]++] = r;
    rows_.swap(by_batch);
    for (size_t b = 0; b + 1 < first_row_.size(); ++b) {
      const auto first = rows_.begin() + first_row_[b], last = rows_.begin() + first_row_[b + 1];
      if (!std::is_sorted(first, last, by_start)) std::sort(first, last, by_start);
    }
  }
  static constexpr int64_t kNoBatch = -2;
  // The id of the earliest fetch of `batch` starting at or after `t`; -1 when
  // none, kNoBatch when no fetch of `batch` at all (one search for both).
  int64_t FirstAtOrAfter(uint64_t batch, uint64_t t) const {
    auto first = rows_.begin(), last = rows_.end();
    if (!first_row_.empty()) {
      if (batch + 1 >= first_row_.size()) return kNoBatch;
      first = rows_.begin() + first_row_[batch];
      last = rows_.begin() + first_row_[batch + 1];
    } else {
      first = std::lower_bound(first, last, batch, [](const Row& r, uint64_t b) { return r.batch < b; });
    }
    if (first == last || first->batch != batch) return kNoBatch;
    auto it = std::lower_bound(first, last, std::make_pair(batch, t), [](const Row& r, const std::pair<uint64_t, uint64_t>& k) {
      return std::tie(r.batch, r.start_ns) < std::tie(k.first, k.second);
    });
    return it != last && it->batch == batch ? static_cast<int64_t>(it->id) : -1;
  }
  void Reserve(size_t n) { rows_.reserve(n); }

 private:
  struct Row {
    uint64_t batch = 0, start_ns = 0;
    uint32_t order = 0, id = 0;
  };
  HugeVector<Row> rows_;
  HugeVector<uint32_t> first_row_;  // by batch, when dense; rows of batch b: [first_row_[b], first_row_[b + 1])
};

// One fetch span of a loader, as the account reads it.
struct FetchFact {
  uint64_t start_ns = 0, end_ns = 0;
  uint64_t batch = 0;            // arg: the batch index in its epoch
  uint32_t pid = 0;              // the fetching process (the loader's own pid when num_workers = 0)
  uint32_t thread = 0;           // index into Trace::threads
  bool has_cpu = false;          // cpu_ns/delay_ns known: measured, or estimated
  bool estimated = false;        // the counter budget skipped it: cpu, delay and bytes are its thread's estimates
  uint64_t cpu_ns = 0, delay_ns = 0;
  int64_t device_bytes = -1;     // read_storage span: bytes from the device; -1 = not recorded
  // Whether it read from the device: 0 or 1 when measured; for a fetch the
  // budget skipped, the share of its stratum's sampled fetches that did
  // (device_bytes is then their mean, a total's estimate, not this fetch's).
  float reading = 0;
  int64_t call_bytes = -1;       // read_calls span: bytes through read syscalls; -1 = not recorded
  int64_t system_ns = -1;        // system_cpu span: the thread's CPU in the kernel; -1 = not recorded
};
using FetchFactList = HugeVector<FetchFact>;  // one per fetch span: millions in a long run

// The account of `loader` (account.cpp): fills account_all, account_steady,
// the stall fractions, verdict, bottleneck, advice, persistent_saving_s and the
// DS-Analyzer split. Needs the iterations, epochs, workers, prefetch
// (batch_deliverable) and fetch_reads filled.
void FillAccount(const Trace& trace, const FetchFactList& fetches, LoaderAnalysis& loader);

// The threads that run side by side on `cores` usable cores (a CPU quota
// of 1.5 cores still runs 2 at once, each for part of the period).
inline uint32_t WholeCores(double cores) { return cores > 0 ? static_cast<uint32_t>(std::ceil(cores - 1e-9)) : 0; }

// The advice from the account's causes and the loader's facts (its
// worker_predictions included); FillAccount calls it, and PredictAdvisedWorkers
// again once the predictions are in.
void WriteAdvice(LoaderAnalysis& loader, double cores);

// The worker counts the advice would point to (more for the prep or other
// blocking, 0 where receiving a batch costs more than making it), in
// increasing order; empty where it points to none.
std::vector<int32_t> WorkerCountsToPredict(const LoaderAnalysis& loader, double cores);

// Fills each loader's worker_predictions with the model (what `stallprof
// whatif --workers N` prints) and rewrites its advice with them.
void PredictAdvisedWorkers(const Trace& trace, TraceAnalysis& analysis);

// Per string id: true for the names of the hook's calibration spans (names::kCalibrationPrefix).
std::vector<bool> CalibrationNames(const Trace& trace);

// Linear interpolation of a sampled series at `t` (clamped to its ends); 0 when empty.
double SeriesAt(const std::vector<uint64_t>& t_ns, const std::vector<uint64_t>& values, uint64_t t);

// The most of the [first, last] intervals that overlap at one instant (0 when
// empty): how many threads ran a stage, or fetched for a loader, at once.
uint32_t MostAtOnce(std::vector<std::pair<uint64_t, uint64_t>> intervals);

}  // namespace stallprof::analysis::internal
