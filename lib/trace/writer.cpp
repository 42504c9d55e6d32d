#include "writer.h"

#include <fmt/core.h>
#include <unistd.h>
#include <zlib.h>

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

}  // namespace

Result<std::unique_ptr<TraceWriter>> TraceWriter::Create(const std::string& path, const pb::TraceHeader& header) {
  std::unique_ptr<TraceWriter> w(new TraceWriter());
  w->path_ = path;
  w->file_ = std::fopen(path.c_str(), "wb");
  if (!w->file_)
    return RuntimeError(fmt::format("cannot create trace '{}', {}, check that the directory exists and is writable",
                                    path, std::strerror(errno)));
  if (std::fwrite(kTraceMagic, 1, sizeof(kTraceMagic), w->file_) != sizeof(kTraceMagic)) return WriteError(path);
  w->bytes_ = sizeof(kTraceMagic);
  pb::Chunk chunk;
  *chunk.mutable_header() = header;
  if (auto s = w->Write(chunk); !s.ok()) return s.error();
  return w;
}

TraceWriter::~TraceWriter() {
  if (file_) std::fclose(file_);
}

Status TraceWriter::Write(const pb::Chunk& chunk) {
  std::string body;
  if (!chunk.SerializeToString(&body))
    return RuntimeError(fmt::format("cannot write trace '{}', a chunk failed to serialize, this is a bug", path_));
  return WriteEncoded(body);
}

Status TraceWriter::WriteEncoded(std::string_view body) {
  if (!file_) return RuntimeError(fmt::format("cannot write trace '{}', it is already closed, this is a bug", path_));
  buffer_.clear();
  AppendVarint32(buffer_, static_cast<uint32_t>(body.size()));
  const size_t prefix = buffer_.size();
  uint32_t crc = static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(body.data()), body.size()));
  char crc_bytes[4];
  for (int i = 0; i < 4; ++i) crc_bytes[i] = static_cast<char>((crc >> (8 * i)) & 0xff);
  // The whole chunk, then a flush: a killed launcher leaves whole chunks
  // (and at worst a partial last one, which readers report as truncated).
  if (std::fwrite(buffer_.data(), 1, prefix, file_) != prefix ||
      std::fwrite(body.data(), 1, body.size(), file_) != body.size() || std::fwrite(crc_bytes, 1, 4, file_) != 4 ||
      std::fflush(file_) != 0)
    return WriteError(path_);
  bytes_ += prefix + body.size() + 4;
  return Status::Ok();
}

Status TraceWriter::Close() {
  if (!file_) return Status::Ok();
  bool ok = std::fflush(file_) == 0 && fsync(fileno(file_)) == 0;
  ok = (std::fclose(file_) == 0) && ok;
  file_ = nullptr;
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
