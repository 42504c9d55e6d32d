#include "writer.h"

#include <fmt/core.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>

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
  if (!file_) return RuntimeError(fmt::format("cannot write trace '{}', it is already closed, this is a bug", path_));
  std::string body;
  if (!chunk.SerializeToString(&body))
    return RuntimeError(fmt::format("cannot write trace '{}', a chunk failed to serialize, this is a bug", path_));
  buffer_.clear();
  AppendVarint32(buffer_, static_cast<uint32_t>(body.size()));
  buffer_ += body;
  uint32_t crc = static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(body.data()), body.size()));
  for (int i = 0; i < 4; ++i) buffer_.push_back(static_cast<char>((crc >> (8 * i)) & 0xff));
  // One fwrite per chunk and a flush: a killed launcher leaves whole chunks.
  if (std::fwrite(buffer_.data(), 1, buffer_.size(), file_) != buffer_.size() || std::fflush(file_) != 0)
    return WriteError(path_);
  bytes_ += buffer_.size();
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

void SpanBatchBuilder::Add(const SpanRow& row) {
  const size_t i = size();
  if (i == 0) {
    batch_.set_thread_id(thread_id_);
    batch_.set_base_ns(row.start_ns);
    prev_end_ = row.start_ns;
  }
  batch_.add_start_delta_ns(static_cast<int64_t>(row.start_ns - prev_end_));
  prev_end_ = row.start_ns + row.duration_ns;
  batch_.add_duration_ns(row.duration_ns);
  batch_.add_arg(row.arg);

  // A column stays a single entry while every span shares its value; the
  // first differing span expands it to one entry per span.
  auto add_collapsible = [i](google::protobuf::RepeatedField<uint32_t>* col, bool& varies, uint32_t v) {
    if (i == 0) {
      col->Add(v);
    } else if (varies) {
      col->Add(v);
    } else if (col->Get(0) != v) {
      varies = true;
      const uint32_t first = col->Get(0);
      col->Reserve(static_cast<int>(i + 1));
      for (size_t k = 1; k < i; ++k) col->Add(first);
      col->Add(v);
    }
  };
  add_collapsible(batch_.mutable_name(), name_varies_, row.name);
  add_collapsible(batch_.mutable_scope(), scope_varies_, row.scope);
  add_collapsible(batch_.mutable_kind(), kind_varies_, row.kind);

  if (i % 64 == 0) batch_.add_has_cpu_bits(0);
  if (row.has_cpu == CpuMeasured::kYes) {
    batch_.set_has_cpu_bits(static_cast<int>(i / 64), batch_.has_cpu_bits(static_cast<int>(i / 64)) | (1ull << (i % 64)));
    batch_.add_cpu_ns(row.cpu_ns);
    batch_.add_delay_ns(row.delay_ns);
  }
}

void SpanBatchBuilder::TakeInto(pb::Chunk& chunk) {
  // Defaults need no bytes: scope 0 and kind 1 (span) for the whole batch.
  if (!scope_varies_ && batch_.scope_size() == 1 && batch_.scope(0) == 0) batch_.clear_scope();
  if (!kind_varies_ && batch_.kind_size() == 1 && batch_.kind(0) == 1) batch_.clear_kind();
  bool any_cpu = batch_.cpu_ns_size() > 0;
  if (!any_cpu) batch_.clear_has_cpu_bits();
  chunk.mutable_spans()->Swap(&batch_);
  batch_.Clear();
  name_varies_ = scope_varies_ = kind_varies_ = false;
  prev_end_ = 0;
}

}  // namespace stallprof
