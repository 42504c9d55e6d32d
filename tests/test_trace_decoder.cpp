// TraceDecoder and its SpanSink: every span reaches the sink once, in file
// order, after the strings it names; everything else lands in the Trace.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <span>

#include "trace/decoder.h"
#include "trace/reader.h"
#include "trace/writer.h"

using namespace stallprof;

namespace {

std::string TempPath(const char* tag) {
  return std::string("/tmp/stallprof-test-decoder-") + tag + "-" + std::to_string(getpid()) + ".pb";
}

pb::TraceHeader Header() {
  pb::TraceHeader h;
  h.set_version_major(kTraceVersionMajor);
  h.set_version_minor(kTraceVersionMinor);
  h.set_hostname("host");
  return h;
}

void WriteStrings(TraceWriter& w, uint32_t first, std::initializer_list<const char*> values) {
  pb::Chunk c;
  c.mutable_strings()->set_first_id(first);
  for (auto* v : values) c.mutable_strings()->add_value(v);
  REQUIRE(w.Write(c).ok());
}

void WriteThread(TraceWriter& w, uint32_t id, uint32_t tid) {
  pb::Chunk c;
  c.mutable_thread()->set_thread_id(id);
  c.mutable_thread()->set_pid(100);
  c.mutable_thread()->set_tid(tid);
  REQUIRE(w.Write(c).ok());
}

// Records every call, checking the ordering rules as it goes.
class RecordingSink final : public SpanSink {
 public:
  void Strings(const Trace& trace, uint32_t first_id) override {
    CHECK(first_id == defined);  // announced once each, in order
    defined = static_cast<uint32_t>(trace.strings.size());
    ++string_calls;
  }
  Status Spans(const Trace& trace, std::span<const DecodedSpan> spans) override {
    CHECK(!spans.empty());
    CHECK(spans.size() <= kSpanBlock);
    for (const auto& s : spans) {
      CHECK(s.name < defined);  // its string was announced before
      CHECK(s.thread < trace.threads.size());
      seen.push_back(s);
    }
    return Status::Ok();
  }
  uint32_t defined = 0;
  int string_calls = 0;
  std::vector<DecodedSpan> seen;
};

}  // namespace

TEST_CASE("a sink sees every span of a written trace exactly once, after the strings it names") {
  const std::string path = TempPath("sink");
  std::vector<SpanRow> written;
  {
    auto w = TraceWriter::Create(path, Header());
    REQUIRE(w.ok());
    WriteStrings(**w, 1, {"dataloader.wait", "dataloader.fetch"});
    WriteThread(**w, 0, 101);
    WriteThread(**w, 1, 102);
    uint64_t t = 1000;
    for (uint32_t batch = 0; batch < 6; ++batch) {
      if (batch == 3) WriteStrings(**w, 3, {"late.name"});  // names defined between batches
      SpanBatchBuilder b(batch % 2);
      const int rows = batch == 4 ? 1000 : 300;  // more than one block per batch
      for (int i = 0; i < rows; ++i) {
        SpanRow r{.start_ns = t, .duration_ns = static_cast<uint64_t>(i % 7), .name = batch >= 3 ? 3u : 1u + i % 2,
                  .arg = static_cast<uint64_t>(i), .scope = static_cast<uint16_t>(i % 3),
                  .kind = static_cast<uint32_t>(i % 5 == 0 ? 4 : 1)};
        if (i % 4 == 0) {
          r.has_cpu = CpuMeasured::kYes;
          r.cpu_ns = i * 3;
          r.delay_ns = i;
        }
        t += 10;
        b.Add(r);
        written.push_back(r);
      }
      pb::Chunk spans;
      b.TakeInto(spans);
      REQUIRE((*w)->Write(spans).ok());
    }
    REQUIRE((*w)->Close().ok());
  }

  Trace trace;
  RecordingSink sink;
  REQUIRE(DecodeTraceFile(path, trace, sink).ok());
  CHECK(sink.string_calls == 3);  // "" at id 0, then the two Strings chunks
  CHECK(sink.defined == 4);
  CHECK(trace.strings.size() == 4);
  CHECK(trace.threads.size() == 2);
  CHECK(trace.spans.size() == 0);  // spans go to the sink only
  REQUIRE(sink.seen.size() == written.size());
  size_t i = 0;
  for (uint32_t batch = 0; batch < 6; ++batch) {
    const size_t rows = batch == 4 ? 1000 : 300;
    for (size_t k = 0; k < rows; ++k, ++i) {
      const auto& s = sink.seen[i];
      const auto& r = written[i];
      INFO("span " << i);
      CHECK(s.thread == batch % 2);
      CHECK(s.start_ns == r.start_ns);
      CHECK(s.duration_ns == r.duration_ns);
      CHECK(s.name == r.name);
      CHECK(s.arg == r.arg);
      CHECK(s.scope == r.scope);
      CHECK(static_cast<uint32_t>(s.kind) == r.kind);
      CHECK(s.has_cpu == (r.has_cpu == CpuMeasured::kYes));
      CHECK(s.cpu_ns == (s.has_cpu ? r.cpu_ns : 0));
      CHECK(s.delay_ns == (s.has_cpu ? r.delay_ns : 0));
    }
  }
  std::remove(path.c_str());
}

TEST_CASE("spans a sink folds are summed per thread, name and scope, and dropped and folded ones never reach it") {
  const std::string path = TempPath("fold");
  enum : uint32_t { kKeep = 1, kFold, kDrop, kLate };
  std::vector<std::pair<uint32_t, SpanRow>> written;  // (thread, row)
  {
    auto w = TraceWriter::Create(path, Header());
    REQUIRE(w.ok());
    WriteStrings(**w, 1, {"keep", "fold", "drop"});
    WriteThread(**w, 0, 101);
    WriteThread(**w, 1, 102);
    uint64_t t = 1000;
    for (uint32_t batch = 0; batch < 5; ++batch) {
      if (batch == 2) WriteStrings(**w, kLate, {"late"});  // no action given for it: handed over
      SpanBatchBuilder b(batch % 2);
      for (uint32_t i = 0; i < 400; ++i) {  // more than a block, names interleaved
        const uint32_t name = batch >= 2 && i % 11 == 0 ? kLate : 1 + (i * 7 + batch) % 3;
        SpanRow r{.start_ns = t, .duration_ns = 5 + i % 13, .name = name, .arg = i * 1'000'003ull,
                  .scope = i % 5 == 0 ? 2u : 1u, .kind = i % 9 == 0 ? 4u : 1u};
        if (i % 3 == 0) {
          r.has_cpu = CpuMeasured::kYes;
          r.cpu_ns = 3 + i % 4;
          r.delay_ns = 100'000 + i;  // multi-byte varints in the columns stepped over
        }
        t += 20 + i % 3;
        b.Add(r);
        written.emplace_back(batch % 2, r);
      }
      pb::Chunk spans;
      b.TakeInto(spans);
      REQUIRE((*w)->Write(spans).ok());
    }
    REQUIRE((*w)->Close().ok());
  }
  // What the sink should get, from the rows written.
  std::vector<std::pair<uint32_t, SpanRow>> handed;
  std::vector<SpanTotals> folds;
  for (const auto& row : written) {
    const uint32_t thread = row.first;  // not a structured binding: clang 14 cannot capture one in a lambda
    const SpanRow& r = row.second;
    if (r.name == kKeep || r.name == kLate) handed.emplace_back(thread, r);
    if (r.name != kFold || r.kind != 1) continue;
    auto it = std::find_if(folds.begin(), folds.end(),
                           [&](const SpanTotals& f) { return f.thread == thread && f.scope == r.scope; });
    if (it == folds.end()) {
      it = folds.insert(folds.end(), SpanTotals{});
      it->thread = thread;
      it->name = kFold;
      it->scope = static_cast<uint16_t>(r.scope);
    }
    it->count++;
    it->wall_ns += r.duration_ns;
    if (r.has_cpu == CpuMeasured::kYes) {
      it->count_with_cpu++;
      it->wall_with_cpu_ns += r.duration_ns;
      it->cpu_ns += r.cpu_ns;
    }
    if (r.start_ns < it->first_start) {
      it->first_duration_ns = r.duration_ns;
      it->first_cpu_ns = r.has_cpu == CpuMeasured::kYes ? r.cpu_ns : 0;
      it->first_has_cpu = r.has_cpu == CpuMeasured::kYes;
    }
    it->first_start = std::min(it->first_start, r.start_ns);
    it->last_end = std::max(it->last_end, r.start_ns + r.duration_ns);
  }

  Trace trace;
  RecordingSink sink;
  sink.actions = {SpanAction::kHand, SpanAction::kHand, SpanAction::kFold, SpanAction::kDrop};
  REQUIRE(DecodeTraceFile(path, trace, sink).ok());
  REQUIRE(sink.seen.size() == handed.size());
  for (size_t i = 0; i < handed.size(); ++i) {
    const auto& s = sink.seen[i];
    const auto& [thread, r] = handed[i];
    INFO("handed span " << i);
    CHECK(s.thread == thread);
    CHECK(s.name == r.name);
    CHECK(s.start_ns == r.start_ns);
    CHECK(s.duration_ns == r.duration_ns);
    CHECK(s.arg == r.arg);
    CHECK(s.scope == r.scope);
    CHECK(static_cast<uint32_t>(s.kind) == r.kind);
    CHECK(s.cpu_ns == (r.has_cpu == CpuMeasured::kYes ? r.cpu_ns : 0));
    CHECK(s.delay_ns == (r.has_cpu == CpuMeasured::kYes ? r.delay_ns : 0));
  }
  REQUIRE(sink.folds.size() == 4);  // 2 threads x 2 scopes
  REQUIRE(folds.size() == 4);
  for (size_t i = 0; i < folds.size(); ++i) {
    const SpanTotals &got = sink.folds[i], &want = folds[i];
    INFO("fold " << i);
    CHECK(got.thread == want.thread);
    CHECK(got.name == want.name);
    CHECK(got.scope == want.scope);
    CHECK(got.count == want.count);
    CHECK(got.count_with_cpu == want.count_with_cpu);
    CHECK(got.wall_ns == want.wall_ns);
    CHECK(got.wall_with_cpu_ns == want.wall_with_cpu_ns);
    CHECK(got.cpu_ns == want.cpu_ns);
    CHECK(got.first_start == want.first_start);
    CHECK(got.first_duration_ns == want.first_duration_ns);  // the earliest span itself (a worker's first item)
    CHECK(got.first_cpu_ns == want.first_cpu_ns);
    CHECK(got.first_has_cpu == want.first_has_cpu);
    CHECK(got.last_end == want.last_end);
  }
  std::remove(path.c_str());
}

TEST_CASE("a sink's error stops the decoding and is returned") {
  const std::string path = TempPath("sinkerror");
  {
    auto w = TraceWriter::Create(path, Header());
    REQUIRE(w.ok());
    WriteStrings(**w, 1, {"x"});
    WriteThread(**w, 0, 101);
    SpanBatchBuilder b(0);
    b.Add({.start_ns = 1, .duration_ns = 1, .name = 1, .kind = 1});
    pb::Chunk spans;
    b.TakeInto(spans);
    REQUIRE((*w)->Write(spans).ok());
    REQUIRE((*w)->Close().ok());
  }
  struct FailingSink final : SpanSink {
    Status Spans(const Trace&, std::span<const DecodedSpan>) override { return RuntimeError("disk full"); }
  } sink;
  Trace trace;
  auto s = DecodeTraceFile(path, trace, sink);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message == "disk full");
  std::remove(path.c_str());
}

TEST_CASE("A process described again after exec keeps its last description and first sighting") {
  const std::string path = TempPath("reexec");
  {
    auto w = TraceWriter::Create(path, Header());
    REQUIRE(w.ok());
    pb::Chunk before;  // seen by the sampler between fork and exec
    before.mutable_process()->set_pid(300);
    before.mutable_process()->set_rank(-1);
    before.mutable_process()->set_comm("bash");
    before.mutable_process()->set_first_seen_ns(10);
    REQUIRE((*w)->Write(before).ok());
    pb::Chunk after;  // seen on the ring once the training script runs
    after.mutable_process()->set_pid(300);
    after.mutable_process()->set_rank(1);
    after.mutable_process()->set_comm("python3");
    after.mutable_process()->set_first_seen_ns(20);
    REQUIRE((*w)->Write(after).ok());
    REQUIRE((*w)->Close().ok());
  }
  auto trace = LoadTrace(path);
  std::remove(path.c_str());
  REQUIRE(trace.ok());
  REQUIRE(trace->processes.size() == 1);
  CHECK(trace->processes[0].rank == 1);
  CHECK(trace->processes[0].comm == "python3");
  CHECK(trace->processes[0].first_seen_ns == 10);
}

TEST_CASE("a varint's 7-bit groups pack into its value by shifts and by pext alike") {
  // (groups as the 8 bytes hold them, top bits cleared; value)
  const std::pair<uint64_t, uint64_t> cases[] = {
      {0x00, 0},
      {0x7f, 127},
      {0x0100, 128},
      {0x022c, 300},  // the protobuf documentation's example: bytes ac 02
      {0x7f7f7f, (uint64_t{1} << 21) - 1},
      {0x01000000, uint64_t{1} << 21},
      {0x7f7f7f7f7f7f7f7full, (uint64_t{1} << 56) - 1},
      {0x0102030405060708ull, 8 | 7 << 7 | 6 << 14 | 5 << 21 | uint64_t{4} << 28 | uint64_t{3} << 35 |
                                  uint64_t{2} << 42 | uint64_t{1} << 49},
  };
  for (const auto& [groups, value] : cases) {
    INFO("groups " << std::hex << groups);
    CHECK(decoder_internal::PackVarintGroupsWith(false, groups) == value);
  }
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("bmi2")) {
    WARN("SKIP: no BMI2 on this CPU, pext not tried");
    return;
  }
  for (const auto& [groups, value] : cases) {
    INFO("groups " << std::hex << groups);
    CHECK(decoder_internal::PackVarintGroupsWith(true, groups) == value);
  }
#endif
}
