// Where a user's stage span ran on its thread: inside one of the thread's
// fetch spans (a step of the input pipeline, one batch's work) or outside
// them all (e.g. the training loop's own code between next() calls, where
// `with stallprof.stage("augment")` on the main thread lands).
//
// Spans arrive in the order their thread finished them, so a fetch comes
// after the stages inside it: each stage waits, per thread, until the next
// fetch or wait span of its thread places it. One class used by the streaming
// decoder (which folds the placed stages at once) and by analysis of a whole
// trace in memory, so both place alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace stallprof {

enum class StagePlace : uint8_t {
  kUnplaced,  // not a user stage (the hook's own spans): placed by their names
  kInFetch,   // inside a fetch span of its thread: part of producing a batch
  kOutside,   // outside every fetch span of its thread
};

struct PendingStage {
  uint64_t start_ns = 0, duration_ns = 0, cpu_ns = 0;
  uint32_t name = 0;
  uint16_t scope = 0;
  bool has_cpu = false;
};

// Emit is called as emit(thread, const PendingStage&, StagePlace, scope): the
// scope of a stage outside the fetches that has none of its own is the one of
// the wait or fetch that placed it (the loader whose next() came after it).
class StagePlacer {
 public:
  // Stages held per thread at most; beyond it the older half is placed by
  // what the thread has shown: inside the fetches on a thread that fetched
  // (a batch holding thousands of stage spans), else outside.
  static constexpr size_t kMaxPending = 4096;

  template <typename Emit>
  void Stage(uint32_t thread, const PendingStage& stage, Emit&& emit) {
    ThreadState& t = Of(thread);
    if (t.pending.size() >= kMaxPending) {
      const size_t half = kMaxPending / 2;
      for (size_t i = 0; i < half; ++i) emit(thread, t.pending[i], t.fetched ? StagePlace::kInFetch : StagePlace::kOutside, t.pending[i].scope);
      t.pending.erase(t.pending.begin(), t.pending.begin() + static_cast<std::ptrdiff_t>(half));
    }
    t.pending.push_back(stage);
  }

  // A fetch span of `thread` ended: the stages that began within it are in
  // it; those that began before it are outside every fetch.
  template <typename Emit>
  void Fetch(uint32_t thread, uint64_t start_ns, uint16_t scope, Emit&& emit) {
    ThreadState& t = Of(thread);
    t.fetched = true;
    for (const PendingStage& p : t.pending)
      p.start_ns >= start_ns ? emit(thread, p, StagePlace::kInFetch, p.scope)
                             : emit(thread, p, StagePlace::kOutside, p.scope ? p.scope : scope);
    t.pending.clear();
  }

  // A span no fetch contains (a next() call: wait, epoch, epoch_end) of
  // `thread` ended: no later fetch contains the stages before it either.
  template <typename Emit>
  void Wait(uint32_t thread, uint16_t scope, Emit&& emit) {
    if (thread >= threads_.size()) return;
    ThreadState& t = threads_[thread];
    for (const PendingStage& p : t.pending) emit(thread, p, StagePlace::kOutside, p.scope ? p.scope : scope);
    t.pending.clear();
  }

  // The trace ended: the stages still held are placed as the overflow rule says.
  template <typename Emit>
  void Finish(Emit&& emit) {
    for (uint32_t thread = 0; thread < threads_.size(); ++thread) {
      ThreadState& t = threads_[thread];
      for (const PendingStage& p : t.pending)
        emit(thread, p, t.fetched ? StagePlace::kInFetch : StagePlace::kOutside, p.scope);
      t.pending.clear();
    }
  }

 private:
  struct ThreadState {
    std::vector<PendingStage> pending;
    bool fetched = false;
  };
  ThreadState& Of(uint32_t thread) {
    if (thread >= threads_.size()) threads_.resize(thread + 1);
    return threads_[thread];
  }
  std::vector<ThreadState> threads_;
};

// Whether spans named `name` are a user's stages (placed by StagePlacer)
// rather than the hook's own (dataloader.*, stallprof.*).
bool IsUserStageName(const std::string& name);

}  // namespace stallprof
