#include "reader.h"

#include <fmt/core.h>
#include <libdeflate.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "decoder.h"
#include <google/protobuf/stubs/logging.h>

namespace stallprof {
namespace {

// Longer chunks than this are not written by any stallprof (a batch is at most
// ~64K spans, about 1 MiB): a bigger length field means the file is corrupt.
constexpr uint32_t kMaxChunkBytes = 256u << 20;

}  // namespace

Error CorruptTraceError(const std::string& path, uint64_t offset, const std::string& why) {
  return InputError(fmt::format("trace '{}' is corrupt, {} (chunk at byte offset {}), re-record the run", path, why, offset));
}

Status CheckTraceVersion(const std::string& path, const pb::TraceHeader& header) {
  if (header.version_major() > kTraceVersionMajor)
    return InputError(fmt::format(
        "trace '{}' was written by a newer stallprof (trace version {}.{}, this build reads {}.x): upgrade stallprof",
        path, header.version_major(), header.version_minor(), kTraceVersionMajor));
  if (header.version_major() == 0)
    return InputError(fmt::format("trace '{}' has a header without a version, it was not written by stallprof run, "
                                  "re-record the run",
                                  path));
  return Status::Ok();
}

void QuietProtobufLog() {
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);  // nullptr: discard every message
    return true;
  }();
  (void)quiet;
}

Result<std::unique_ptr<ChunkReader>> ChunkReader::Open(const std::string& path) {
  QuietProtobufLog();
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT)
      return InputError(fmt::format("cannot read trace '{}', no such file, record one with 'stallprof run -- <command>' "
                                    "or pass the right path",
                                    path));
    return InputError(fmt::format("cannot read trace '{}', {}, check the path and its permissions", path,
                                  std::strerror(errno)));
  }
  if (S_ISDIR(st.st_mode))
    return InputError(fmt::format("cannot read trace '{}', it is a directory, pass the trace file inside it", path));
  std::unique_ptr<ChunkReader> r(new ChunkReader());
  r->path_ = path;
  r->file_ = std::fopen(path.c_str(), "rbe");
  if (!r->file_)
    return InputError(fmt::format("cannot read trace '{}', {}, check its permissions", path, std::strerror(errno)));
  // A small stdio buffer for the length prefixes and small chunks: a span
  // chunk (~600 KiB) is bigger, and fread reads it straight into the chunk
  // buffer instead of copying it through stdio's (a second copy of the file).
  std::setvbuf(r->file_, nullptr, _IOFBF, 64 << 10);
  r->file_size_ = static_cast<uint64_t>(st.st_size);
  if (!S_ISREG(st.st_mode)) {
    // A device or pipe (/dev/urandom, <(...)) has no size to check chunks
    // against: say whether it is a trace at all, never "empty".
    char head[sizeof(kTraceMagic)] = {};
    const size_t n = std::fread(head, 1, sizeof(head), r->file_);
    if (n < sizeof(head) || std::memcmp(head, kTraceMagic, sizeof(head)) != 0)
      return InputError(fmt::format("'{}' is not a stallprof trace, it does not start with the SPTRACE magic, "
                                    "pass a trace.pb written by 'stallprof run'",
                                    path));
    return InputError(fmt::format("cannot read trace '{}', it is not a regular file (a pipe or device), copy it "
                                  "to a file first",
                                  path));
  }
  if (r->file_size_ == 0)
    return InputError(fmt::format("cannot read trace '{}', the file is empty, the run recorded nothing: re-record it",
                                  path));
  char magic[sizeof(kTraceMagic)];
  size_t got = std::fread(magic, 1, sizeof(magic), r->file_);
  if (std::memcmp(magic, kTraceMagic, got) != 0 || (got < sizeof(magic) && r->file_size_ >= sizeof(magic)))
    return InputError(fmt::format("'{}' is not a stallprof trace, it does not start with the SPTRACE magic, "
                                  "pass a trace.pb written by 'stallprof run'",
                                  path));
  r->offset_ = got;
  if (got < sizeof(magic)) r->truncated_ = true;
  return r;
}

ChunkReader::~ChunkReader() {
  if (file_) std::fclose(file_);
}

Result<bool> ChunkReader::NextRaw(std::string_view& bytes) {
  if (truncated_) return false;
  chunk_offset_ = offset_;
  uint32_t length = 0;
  int shift = 0;
  size_t length_bytes = 0;
  for (;;) {
    int c = getc_unlocked(file_);
    if (c == EOF) {
      if (length_bytes != 0) truncated_ = true;
      return false;
    }
    ++length_bytes;
    if (shift == 28 && (c & 0xf0) != 0)
      return CorruptTraceError(path_, chunk_offset_, "a chunk length does not fit 32 bits");
    length |= static_cast<uint32_t>(c & 0x7f) << shift;
    if (!(c & 0x80)) break;
    shift += 7;
  }
  if (length > kMaxChunkBytes)
    return CorruptTraceError(path_, chunk_offset_, fmt::format("a chunk claims {} bytes", length));
  offset_ += length_bytes;
  if (static_cast<uint64_t>(length) + 4 > file_size_ - std::min(file_size_, offset_)) {
    // The file ends inside this chunk: no need to read (or allocate) it.
    truncated_ = true;
    return false;
  }
  buffer_.resize(length + 4);
  size_t got = std::fread(buffer_.data(), 1, buffer_.size(), file_);
  if (got < buffer_.size()) {  // the file shrank under us
    truncated_ = true;
    offset_ += got;
    return false;
  }
  offset_ += buffer_.size();
  const auto* crc_bytes = reinterpret_cast<const uint8_t*>(buffer_.data() + length);
  uint32_t stored = crc_bytes[0] | crc_bytes[1] << 8 | crc_bytes[2] << 16 | static_cast<uint32_t>(crc_bytes[3]) << 24;
  const uint32_t actual = libdeflate_crc32(0, buffer_.data(), length);
  if (stored != actual) return CorruptTraceError(path_, chunk_offset_, "a chunk fails its CRC check");
  bytes = std::string_view(buffer_.data(), length);
  return true;
}

Result<bool> ChunkReader::Next(pb::Chunk& chunk) {
  std::string_view bytes;
  auto more = NextRaw(bytes);
  if (!more.ok() || !*more) return more;
  if (!chunk.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return CorruptTraceError(path_, chunk_offset_, "a chunk does not parse");
  if (chunk.has_header())
    if (auto s = CheckTraceVersion(path_, chunk.header()); !s.ok()) return s.error();
  return true;
}

namespace {

// Appends every span to Trace::spans.
class TableSink final : public SpanSink {
 public:
  explicit TableSink(Trace& trace) : t_(trace) {}

  Status Spans(const Trace& trace, std::span<const DecodedSpan> spans) override {
    auto& s = t_.spans;
    if (!reserved_) {
      // Reserve for the densest possible encoding (about 4 bytes per span):
      // pages never written are never touched, so this costs address space,
      // not memory, and the columns never reallocate (which would double the peak).
      ReserveRows(s, trace.bytes / 4 + 16);
      reserved_ = true;
    }
    for (const DecodedSpan& d : spans) AppendSpan(s, d);
    return Status::Ok();
  }

 private:
  Trace& t_;
  bool reserved_ = false;
};

}  // namespace

Result<Trace> LoadTrace(const std::string& path) {
  Trace trace;
  TableSink sink(trace);
  if (auto s = DecodeTraceFile(path, trace, sink); !s.ok()) return s.error();
  return trace;
}

}  // namespace stallprof
