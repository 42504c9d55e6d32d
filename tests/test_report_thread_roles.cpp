#include <catch2/catch.hpp>

#include "report/thread_roles.h"
#include "test_analysis_trace_builder.h"

using namespace stallprof;
using namespace stallprof::report;
using namespace stallprof::testing;

namespace {

std::vector<std::string> LabelsOf(const Trace& trace) {
  ThreadRoles roles;
  roles.Strings(trace);
  const auto& s = trace.spans;
  for (size_t i = 0; i < s.size(); ++i) roles.Observe(s.thread[i], s.name[i], s.scope[i], s.arg[i]);
  return roles.Labels(trace);
}

}  // namespace

TEST_CASE("Threads are named by their role in the input pipeline, loaders by their name config") {
  TraceBuilder b;
  b.Process(100, 1);
  b.Process(201, 100);
  b.Process(202, 100);
  b.Config(100, 1, "name", "train");
  b.Config(100, 2, "name", "val");
  const uint32_t main = b.Thread(100, 100);
  const uint32_t pin = b.Thread(100, 105);
  const uint32_t other = b.Thread(100, 106);
  const uint32_t worker3 = b.Thread(201, 201);
  const uint32_t unnumbered = b.Thread(202, 202);
  const uint32_t silent = b.Thread(100, 107);
  b.trace.threads[other].name = "python3";
  b.Span(main, names::kWait, 0, 10, 1);
  b.Span(main, names::kWait, 20, 10, 2);
  b.Span(main, names::kWait, 40, 10, 1);
  b.Span(pin, names::kPin, 0, 10, 1);
  b.Span(other, "my.stage", 0, 10, 0);
  b.Instant(worker3, names::kWorkerStart, 0, 1, 3);
  b.Span(worker3, names::kFetch, 0, 10, 1);
  b.Span(unnumbered, names::kFetch, 0, 10, 2);
  const auto labels = LabelsOf(b.trace);
  REQUIRE(labels.size() == b.trace.threads.size());
  CHECK(labels[main] == "main (loaders train, val)");
  CHECK(labels[pin] == "pin-memory (loader train)");
  CHECK(labels[other] == "python3");
  CHECK(labels[worker3] == "worker 3 of loader train");  // its worker_start instant, its loader from the parent process
  CHECK(labels[unnumbered] == "worker 0 of loader val");  // no worker_start: numbered in order of appearance
  CHECK(labels[silent] == "thread 107");
}

TEST_CASE("A main thread that fetches its own batches (num_workers=0) is the main thread, a loader without a name its id") {
  TraceBuilder b;
  b.Process(100, 1);
  const uint32_t main = b.Thread(100, 100);
  b.Span(main, names::kFetch, 0, 10, 4);
  b.Span(main, names::kWait, 0, 20, 4);
  CHECK(LabelsOf(b.trace)[main] == "main (loader 4)");
}

TEST_CASE("A thread other than the main one that iterates a loader is named by its tid, not main") {
  TraceBuilder b;
  b.Process(100, 1);
  const uint32_t prefetch = b.Thread(100, 107);
  b.Span(prefetch, names::kWait, 0, 20, 4);
  CHECK(LabelsOf(b.trace)[prefetch] == "thread 107 iterating (loader 4)");
}
