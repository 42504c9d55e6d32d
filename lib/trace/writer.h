// Writing trace.pb incrementally: every chunk is complete on disk (length, body,
// CRC) before the next begins, so a crash loses at most the chunk being written.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "trace.pb.h"

namespace stallprof {

class TraceWriter {
 public:
  // Where Create writes: straight to `path`, or to a hidden temporary file in
  // the same directory that Publish() renames to `path` (so a run that never
  // starts leaves an existing trace alone).
  enum class Placement { kDirect, kTemporary };
  // Creates (truncates) the file and writes the magic and `header` as the first chunk.
  static Result<std::unique_ptr<TraceWriter>> Create(const std::string& path, const pb::TraceHeader& header,
                                                     Placement placement = Placement::kDirect);
  ~TraceWriter();
  // Appends one chunk (one write(2), not fsync'd). After a failed write the
  // file is cut back to its last complete chunk, so it stays readable.
  Status Write(const pb::Chunk& chunk);
  // Appends one chunk given as its protobuf encoding (SpanBatchBuilder output).
  Status WriteEncoded(std::string_view chunk_bytes);
  // kTemporary: renames the temporary file to the final path (atomic, same
  // directory). No-op for kDirect or when already published.
  Status Publish();
  // kTemporary and not published: closes and removes the temporary file.
  void Discard();
  // fsyncs and closes; Write after Close is an error.
  Status Close();
  uint64_t bytes_written() const { return bytes_; }
  // The file being written now (the temporary name until Publish).
  const std::string& current_path() const { return current_path_; }

 private:
  TraceWriter() = default;
  Status WriteEncoded(std::string_view bytes, bool raw);
  int fd_ = -1;
  std::string path_;          // the final path, used in messages
  std::string current_path_;  // == path_ once published
  bool published_ = true;
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
// the batch shares the value. Spans may come in any order. Encodes varints
// straight into column buffers (no protobuf objects per span): the drain
// thread must keep up with tens of millions of spans per second.
class SpanBatchBuilder {
 public:
  explicit SpanBatchBuilder(uint32_t thread_id) : thread_id_(thread_id) {}
  void Add(const SpanRow& row);
  size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  // Moves the batch into `chunk` (as its spans body) and starts a new one.
  void TakeInto(pb::Chunk& chunk);
  // Appends the batch's Chunk encoding to `out` (for TraceWriter::WriteEncoded)
  // and starts a new one.
  void TakeEncoded(std::string& out);

 private:
  // A packed varint column being built.
  struct Column {
    std::vector<uint8_t> buf;  // buf[0, used) is the column; the rest is headroom
    size_t used = 0;
    void Put(uint64_t v) {
      if (buf.size() - used < 10) buf.resize(std::max<size_t>(256, buf.size() * 2));
      uint8_t* p = buf.data() + used;
      while (v >= 0x80) {
        *p++ = static_cast<uint8_t>(v | 0x80);
        v >>= 7;
      }
      *p++ = static_cast<uint8_t>(v);
      used = static_cast<size_t>(p - buf.data());
    }
    void Append(const Column& other) {
      if (buf.size() - used < other.used) buf.resize(used + other.used);
      std::copy(other.buf.data(), other.buf.data() + other.used, buf.data() + used);
      used += other.used;
    }
    bool empty() const { return used == 0; }
    void clear() { used = 0; }
  };
  // A column kept as one value while every span shares it.
  struct Collapsible {
    Column column;
    uint64_t first = 0;
    bool varies = false;
    void Put(size_t index, uint64_t v);
  };
  void Reset();

  uint32_t thread_id_;
  size_t count_ = 0;
  uint64_t base_ns_ = 0;
  uint64_t prev_end_ = 0;
  Column start_delta_, duration_, arg_, cpu_, delay_;
  Collapsible name_, scope_, kind_;
  std::vector<uint64_t> has_cpu_bits_;
  bool any_cpu_ = false;
  Column body_;  // encoding scratch, kept to avoid a fresh allocation per batch
};

}  // namespace stallprof
