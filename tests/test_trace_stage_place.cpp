// StagePlacer: a user's stage spans placed inside or outside the fetch spans
// of their thread, from spans in the order their thread finished them.
#include <catch2/catch.hpp>

#include <map>
#include <tuple>

#include "trace/stage_place.h"

using namespace stallprof;

namespace {
struct Placed {
  std::map<std::tuple<uint32_t, uint32_t, StagePlace, uint16_t>, int> count;  // (thread, name, place, scope)
  auto Emit() {
    return [this](uint32_t thread, const PendingStage& s, StagePlace place, uint16_t scope) {
      count[{thread, s.name, place, scope}]++;
    };
  }
};
PendingStage StageAt(uint64_t start, uint32_t name, uint16_t scope = 0) { return {start, 10, 5, name, scope, true}; }
}  // namespace

TEST_CASE("Stages that began within a fetch are in it, those before it and before a next() call are outside") {
  StagePlacer placer;
  Placed p;
  // Thread 0 fetches in the main process (num_workers=0): per batch a stage
  // inside the fetch (name 1), and one after next() returned (name 2).
  for (int i = 0; i < 3; ++i) {
    const uint64_t t = 1000 * i;
    placer.Stage(0, StageAt(t + 20, 2), p.Emit());  // the previous step's augment, before this fetch
    placer.Stage(0, StageAt(t + 110, 1), p.Emit());
    placer.Fetch(0, t + 100, 7, p.Emit());
  }
  // Thread 1 is a loop thread with workers elsewhere: no fetches, waits only.
  placer.Stage(1, StageAt(50, 2), p.Emit());
  placer.Wait(1, 9, p.Emit());
  placer.Stage(1, StageAt(500, 2, 4), p.Emit());  // a scope of its own stays
  placer.Wait(1, 9, p.Emit());
  CHECK(p.count[{0, 1, StagePlace::kInFetch, 0}] == 3);
  CHECK(p.count[{0, 2, StagePlace::kOutside, 7}] == 3);  // the fetch that placed it names the loader
  CHECK(p.count[{1, 2, StagePlace::kOutside, 9}] == 1);
  CHECK(p.count[{1, 2, StagePlace::kOutside, 4}] == 1);
  CHECK(p.count.size() == 4);
}

TEST_CASE("Stages left at the end or beyond the limit are placed by whether their thread fetched") {
  StagePlacer placer;
  Placed p;
  placer.Fetch(0, 0, 1, p.Emit());  // thread 0 fetches (a worker); thread 1 never does
  const size_t n = StagePlacer::kMaxPending + 10;
  for (size_t i = 0; i < n; ++i) {
    placer.Stage(0, StageAt(100 + i, 1), p.Emit());
    placer.Stage(1, StageAt(100 + i, 1), p.Emit());
  }
  // The older half went out when the limit was reached: nothing is lost.
  CHECK(p.count[{0, 1, StagePlace::kInFetch, 0}] == static_cast<int>(StagePlacer::kMaxPending / 2));
  CHECK(p.count[{1, 1, StagePlace::kOutside, 0}] == static_cast<int>(StagePlacer::kMaxPending / 2));
  placer.Finish(p.Emit());
  CHECK(p.count[{0, 1, StagePlace::kInFetch, 0}] == static_cast<int>(n));
  CHECK(p.count[{1, 1, StagePlace::kOutside, 0}] == static_cast<int>(n));
  CHECK(p.count.size() == 2);
}
