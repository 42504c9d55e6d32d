// Writing trace.pb incrementally: every chunk is complete on disk (length, body,
// CRC) before the next begins, so a crash loses at most the chunk being written.
#pragma once

#include <cstdio>
#include <memory>
#include <string>

#include "common/result.h"
#include "trace.pb.h"

namespace stallprof {

class TraceWriter {
 public:
  // Creates (truncates) `path` and writes the magic and `header` as the first chunk.
  static Result<std::unique_ptr<TraceWriter>> Create(const std::string& path, const pb::TraceHeader& header);
  ~TraceWriter();
  // Appends one chunk and flushes it to the kernel (not fsync'd).
  Status Write(const pb::Chunk& chunk);
  // fsyncs and closes; Write after Close is an error.
  Status Close();
  uint64_t bytes_written() const { return bytes_; }

 private:
  TraceWriter() = default;
  std::FILE* file_ = nullptr;
  std::string path_;
  std::string buffer_;
  uint64_t bytes_ = 0;
};

// One span, instant or counter as the writer takes it (kind: 1 span, 4 instant,
// 5 counter; cpu_ns/delay_ns are stored only when has_cpu is kHasCpu).
enum class CpuMeasured : uint8_t { kNo = 0, kYes = 1 };
struct SpanRow {
  uint64_t start_ns = 0;
  uint64_t duration_ns = 0;
  uint32_t name = 0;  // trace-global string id
  uint64_t arg = 0;
  uint32_t scope = 0;
  uint32_t kind = 1;
  CpuMeasured has_cpu = CpuMeasured::kNo;
  uint64_t cpu_ns = 0;
  uint64_t delay_ns = 0;
};

// Accumulates the spans of one thread into a compact SpanBatch chunk
// (docs/trace-format.md): start_ns delta-encoded against the previous span's
// end, and scope/kind/name columns collapsed to one entry when every span of
// the batch shares the value. Spans may come in any order.
class SpanBatchBuilder {
 public:
  explicit SpanBatchBuilder(uint32_t thread_id) : thread_id_(thread_id) {}
  void Add(const SpanRow& row);
  size_t size() const { return batch_.duration_ns_size(); }
  bool empty() const { return size() == 0; }
  // Moves the batch into `chunk` (as its spans body) and starts a new one.
  void TakeInto(pb::Chunk& chunk);

 private:
  uint32_t thread_id_;
  pb::SpanBatch batch_;
  uint64_t prev_end_ = 0;
  // Constant-column tracking: a column is kept as one entry while all equal.
  bool name_varies_ = false, scope_varies_ = false, kind_varies_ = false;
};

}  // namespace stallprof
