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

}  // namespace stallprof
