#include "writer.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <libdeflate.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "reader.h"

namespace stallprof {
namespace {

void AppendVarint32(std::string& out, uint32_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

Error WriteError(const std::string& path) {
  return RuntimeError(fmt::format("cannot write trace '{}', {}, check free space and permissions", path,
                                  std::strerror(errno)));
}

// A hidden name beside `path`: rename(2) within one directory is atomic.
std::string TemporaryPathFor(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  return fmt::format("{}.{}.stallprof-{}.tmp", dir, base, getpid());
}

}  // namespace

Result<std::unique_ptr<TraceWriter>> TraceWriter::Create(const std::string& path, const pb::TraceHeader& header,
                                                         Placement placement) {
  std::unique_ptr<TraceWriter> w(new TraceWriter());
  w->path_ = path;
  w->published_ = placement == Placement::kDirect;
  w->current_path_ = w->published_ ? path : TemporaryPathFor(path);
  // O_CLOEXEC: the profiled command must not inherit (and write into) the trace.
  w->fd_ = open(w->current_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (w->fd_ < 0)
    return RuntimeError(fmt::format("cannot create trace '{}', {}, check that the directory exists and is writable",
                                    path, std::strerror(errno)));
  pb::Chunk chunk;
  *chunk.mutable_header() = header;
  if (auto s = w->WriteEncoded(std::string_view(kTraceMagic, sizeof(kTraceMagic)), /*raw=*/true); !s.ok()) {
    w->Discard();
    return s.error();
  }
  if (auto s = w->Write(chunk); !s.ok()) {
    w->Discard();
    return s.error();
  }
  return w;
}

TraceWriter::~TraceWriter() {
  if (fd_ >= 0) close(fd_);
}

Status TraceWriter::Write(const pb::Chunk& chunk) {
  std::string body;
  if (!chunk.SerializeToString(&body))
    return RuntimeError(fmt::format("cannot write trace '{}', a chunk failed to serialize, this is a bug", path_));
  return WriteEncoded(body);
}

Status TraceWriter::WriteEncoded(std::string_view body) { return WriteEncoded(body, /*raw=*/false); }

Status TraceWriter::WriteEncoded(std::string_view body, bool raw) {
  if (fd_ < 0) return RuntimeError(fmt::format("cannot write trace '{}', it is already closed, this is a bug", path_));
  buffer_.clear();
  char crc_bytes[4];
  if (!raw) {
    AppendVarint32(buffer_, static_cast<uint32_t>(body.size()));
    const uint32_t crc = libdeflate_crc32(0, body.data(), body.size());
    for (int i = 0; i < 4; ++i) crc_bytes[i] = static_cast<char>((crc >> (8 * i)) & 0xff);
  }
  iovec parts[3] = {{buffer_.data(), buffer_.size()},
                    {const_cast<char*>(body.data()), body.size()},
                    {crc_bytes, raw ? 0u : 4u}};
  const size_t total = parts[0].iov_len + parts[1].iov_len + parts[2].iov_len;
  // The whole chunk in one writev (looping over short writes): a killed
  // launcher leaves whole chunks and at worst a partial last one, which
  // readers report as truncated.
  size_t done = 0;
  while (done < total) {
    iovec rest[3];
    int n = 0;
    size_t skip = done;
    for (const iovec& p : parts) {
      if (skip >= p.iov_len) {
        skip -= p.iov_len;
        continue;
      }
      rest[n++] = {static_cast<char*>(p.iov_base) + skip, p.iov_len - skip};
      skip = 0;
    }
    const ssize_t w = writev(fd_, rest, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      if (w == 0) errno = ENOSPC;
      const int saved = errno;
      // Cut the partial chunk off so the file ends at a chunk boundary.
      if (ftruncate(fd_, static_cast<off_t>(bytes_)) == 0) lseek(fd_, static_cast<off_t>(bytes_), SEEK_SET);
      errno = saved;
      return WriteError(path_);
    }
    done += static_cast<size_t>(w);
  }
  bytes_ += total;
  return Status::Ok();
}

Status TraceWriter::Publish() {
  if (published_) return Status::Ok();
  if (rename(current_path_.c_str(), path_.c_str()) != 0)
    return RuntimeError(fmt::format("cannot write trace '{}', renaming '{}' to it failed: {}, check the directory's "
                                    "permissions",
                                    path_, current_path_, std::strerror(errno)));
  current_path_ = path_;
  published_ = true;
  return Status::Ok();
}

void TraceWriter::Discard() {
  if (published_) return;
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  unlink(current_path_.c_str());
}

Status TraceWriter::Close() {
  if (fd_ < 0) return Status::Ok();
  bool ok = fsync(fd_) == 0;
  ok = (close(fd_) == 0) && ok;
  fd_ = -1;
  if (!ok) return WriteError(path_);
  return Status::Ok();
}

void SpanBatchBuilder::Collapsible::Put(size_t index, uint64_t v) {
  if (index == 0) {
    first = v;
    return;
  }
  if (!varies && v == first) return;
  if (!varies) {
    // First differing span: expand to one entry per span so far.
    varies = true;
    for (size_t k = 0; k < index; ++k) column.Put(first);
  }
  column.Put(v);
}

void SpanBatchBuilder::Add(const SpanRow& row) {
  const size_t i = count_++;
  if (i == 0) {
    base_ns_ = row.start_ns;
    prev_end_ = row.start_ns;
  }
  const int64_t delta = static_cast<int64_t>(row.start_ns - prev_end_);
  start_delta_.Put((static_cast<uint64_t>(delta) << 1) ^ static_cast<uint64_t>(delta >> 63));  // zigzag
  prev_end_ = row.start_ns + row.duration_ns;
  duration_.Put(row.duration_ns);
  arg_.Put(row.arg);
  name_.Put(i, row.name);
  scope_.Put(i, row.scope);
  kind_.Put(i, row.kind);
  if (i % 64 == 0) has_cpu_bits_.push_back(0);
  if (row.has_cpu == CpuMeasured::kYes) {
    has_cpu_bits_.back() |= 1ull << (i % 64);
    cpu_.Put(row.cpu_ns);
    delay_.Put(row.delay_ns);
    any_cpu_ = true;
  }
}

void SpanBatchBuilder::Reset() {
  count_ = 0;
  base_ns_ = prev_end_ = 0;
  for (Column* c : {&start_delta_, &duration_, &arg_, &cpu_, &delay_}) c->clear();
  for (Collapsible* c : {&name_, &scope_, &kind_}) {
    c->column.clear();
    c->varies = false;
    c->first = 0;
  }
  has_cpu_bits_.clear();
  any_cpu_ = false;
}

void SpanBatchBuilder::TakeEncoded(std::string& out) {
  if (count_ == 0) return;
  // Columns that collapsed to one value: a single entry, or none when it is
  // the default (scope 0, kind 1).
  auto finish = [](Collapsible& c, std::optional<uint64_t> default_value) {
    if (c.varies) return;
    c.column.clear();
    if (!default_value || c.first != *default_value) c.column.Put(c.first);
  };
  finish(name_, std::nullopt);
  finish(scope_, 0);
  finish(kind_, 1);
  Column bits;
  if (any_cpu_)
    for (uint64_t w : has_cpu_bits_) bits.Put(w);

  Column& body = body_;  // SpanBatch fields, in field order
  body.clear();
  auto varint_field = [&body](uint32_t field, uint64_t v) {
    if (v == 0) return;
    body.Put(field << 3);
    body.Put(v);
  };
  auto packed_field = [&body](uint32_t field, const Column& c) {
    if (c.empty()) return;
    body.Put((field << 3) | 2);
    body.Put(c.used);
    body.Append(c);
  };
  varint_field(1, thread_id_);
  varint_field(2, base_ns_);
  packed_field(3, start_delta_);
  packed_field(4, duration_);
  packed_field(5, name_.column);
  packed_field(6, arg_);
  packed_field(7, scope_.column);
  packed_field(8, kind_.column);
  packed_field(9, bits);
  packed_field(10, cpu_);
  packed_field(11, delay_);
  Column head;  // Chunk field 5 (spans), length-delimited
  head.Put((5u << 3) | 2);
  head.Put(body.used);
  out.append(reinterpret_cast<const char*>(head.buf.data()), head.used);
  out.append(reinterpret_cast<const char*>(body.buf.data()), body.used);
  Reset();
}

void SpanBatchBuilder::TakeInto(pb::Chunk& chunk) {
  std::string bytes;
  TakeEncoded(bytes);
  chunk.Clear();
  chunk.mutable_spans();  // an empty batch is still a spans chunk
  if (!bytes.empty()) chunk.ParseFromString(bytes);
}

}  // namespace stallprof
