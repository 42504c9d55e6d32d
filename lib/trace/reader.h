// Reading trace.pb: the chunk reader (framing and CRC; decoder.h decodes the
// chunks it returns) and LoadTrace, which builds the in-memory Trace.
// Every failure names the file and what is wrong with it.
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "common/result.h"
#include "trace.h"
#include "trace.pb.h"

namespace stallprof {

// Trace format version written and understood by this build (trace.proto).
inline constexpr uint32_t kTraceVersionMajor = 1;
// 1: page_cache_copy_ns_per_byte; 2: clock_source, tsc_hz, footer tsc_drift_*;
// 3: ProcessSamples.system_cpu_ns; 4: footer job_end_monotonic_ns;
// 5: page_bytes; 6: SystemSamples.cpu_steal_ns; 7: page_reclaim;
// 8: ProcessSamples.main_thread_cpu_ns, main_thread_delay_ns; 9: memory_limit_bytes;
// 10: cpu_quota_cores
inline constexpr uint32_t kTraceVersionMinor = 10;
// The file starts with these 8 bytes.
inline constexpr char kTraceMagic[8] = {'S', 'P', 'T', 'R', 'A', 'C', 'E', '\n'};

class ChunkReader {
 public:
  // Opens `path` and checks the magic. InputError when missing, empty or not a trace.
  static Result<std::unique_ptr<ChunkReader>> Open(const std::string& path);
  ~ChunkReader();
  // Reads the next chunk. true: `chunk` is filled; false: clean end of file,
  // or the file ends inside a chunk (then truncated() is true). InputError on a
  // CRC mismatch, an unparsable chunk or a header of a newer major version.
  Result<bool> Next(pb::Chunk& chunk);
  // Like Next, without parsing: `bytes` is the CRC-checked Chunk encoding, valid
  // until the next call. InputError on a CRC mismatch or an impossible length.
  Result<bool> NextRaw(std::string_view& bytes);
  bool truncated() const { return truncated_; }
  uint64_t offset() const { return offset_; }      // bytes consumed so far
  uint64_t chunk_offset() const { return chunk_offset_; }  // where the last chunk began
  uint64_t file_size() const { return file_size_; }
  const std::string& path() const { return path_; }

 private:
  ChunkReader() = default;
  std::FILE* file_ = nullptr;
  std::string path_;
  std::string buffer_;
  uint64_t offset_ = 0;
  uint64_t chunk_offset_ = 0;
  uint64_t file_size_ = 0;
  bool truncated_ = false;
};

// Loads a whole trace, validating every id. A truncated file loads (with
// Trace::truncated set) up to its last complete chunk.
// Silences protobuf's own logging (idempotent, thread-safe). A chunk that does
// not parse (e.g. a string field with invalid UTF-8) makes libprotobuf print
// "[libprotobuf ERROR ...]" on stderr before we report the error; the reader
// already turns that into the one "stallprof: error:" line. Called by
// ChunkReader::Open; call it before parsing chunks some other way.
void QuietProtobufLog();

Result<Trace> LoadTrace(const std::string& path);

// InputError unless `header` is of a version this build reads (major <= ours).
Status CheckTraceVersion(const std::string& path, const pb::TraceHeader& header);

// "trace '<path>' is corrupt, <why> at byte offset <offset>, re-record the run".
Error CorruptTraceError(const std::string& path, uint64_t offset, const std::string& why);

}  // namespace stallprof
