// PrefetchQueueLine: the prefetch queue at next(), as the text and HTML reports say it.
#include <catch2/catch.hpp>

#include "analysis/analysis.h"
#include "report/analysis_report.h"

using stallprof::analysis::LoaderAnalysis;
using stallprof::report::PrefetchQueueLine;

namespace {
// One worker, prefetch 4: 2.9 batches fetched and not yet taken at next() on
// average, as a Python-bound __getitem__ left them (a user's padded-text loader).
LoaderAnalysis FetchedAhead(uint64_t held, uint64_t free) {
  LoaderAnalysis l;
  l.config.num_workers = 1;
  l.prefetch.capacity = 4;
  l.prefetch.mean_ready = 2.9;
  l.prefetch.max_ready = 3;
  l.prefetch.starved_fraction = 0.01;
  l.prefetch.sends_held = held;
  l.prefetch.sends_free = free;
  return l;
}
}  // namespace

TEST_CASE("The prefetch queue counts batches fetched, and says they were not sent where the fetch held the GIL") {
  // 339 of 343 batches finished while their worker ran a later fetch sat in
  // it until that fetch ended: "ready" would contradict the 69% stall beside it.
  const std::string held = PrefetchQueueLine(FetchedAhead(339, 4));
  CHECK_THAT(held, Catch::StartsWith("prefetch queue: 2.9 batches fetched and not yet taken on average at next() "
                                     "(fetched, not sent: 339 of 343 batches"));
  CHECK_THAT(held, Catch::Contains("its sending thread waiting for the GIL"));
  CHECK_THAT(held, Catch::Contains("(max 3, capacity 4); none at 1% of next() calls; never full"));
  // Batches that went out while the next fetch ran: no such clause.
  const std::string sent = PrefetchQueueLine(FetchedAhead(2, 40));
  CHECK_THAT(sent, !Catch::Contains("not sent"));
  CHECK_THAT(sent, Catch::Contains("fetched and not yet taken on average at next() (max 3"));
  // Too few calls told to say either.
  CHECK_THAT(PrefetchQueueLine(FetchedAhead(5, 0)), !Catch::Contains("not sent"));
}
