#include "chrome.h"

#include <fmt/format.h>

#include <charconv>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <memory>
#include <span>
#include <vector>

#include <zlib.h>

#include "json_writer.h"
#include "thread_roles.h"
#include "trace/decoder.h"
#include "trace/reader.h"

namespace stallprof::report {

namespace {

constexpr size_t kFlushBytes = 1 << 20;
constexpr uint32_t kMachinePid = 0;  // pseudo process holding the machine-wide sampler counters

// The output, buffered; gzip-compressed as it is written when the path ends
// in ".gz" (Perfetto UI and chrome://tracing open .json.gz directly).
class Output {
 public:
  enum class Compression { kNone, kGzip };
  Output(std::FILE* file, std::string path, Compression compression) : file_(file), path_(std::move(path)) {
    buffer_.reserve(kFlushBytes + 4096);
    if (compression == Compression::kGzip) {
      // windowBits 15 + 16: a gzip header and trailer instead of zlib's. Level 1:
      // JSON this repetitive still shrinks ~10x, at several times the speed of level 6.
      gzip_ = deflateInit2(&z_, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK;
      compressed_.resize(kFlushBytes);
      if (!gzip_) init_failed_ = true;
    }
  }
  ~Output() {
    if (gzip_) deflateEnd(&z_);
  }
  Output(const Output&) = delete;
  Output& operator=(const Output&) = delete;

  std::string& buffer() { return buffer_; }
  Status MaybeFlush() { return buffer_.size() >= kFlushBytes ? Flush() : Status::Ok(); }
  Status Flush() { return Write(Z_NO_FLUSH); }
  // Flushes and ends the gzip stream.
  Status Finish() { return Write(Z_FINISH); }
  uint64_t json_bytes() const { return json_written_ + buffer_.size(); }
  uint64_t written() const { return written_; }

 private:
  Status Write(int flush) {
    if (init_failed_) return RuntimeError("cannot compress '" + path_ + "', zlib failed to initialize, write plain JSON instead");
    json_written_ += buffer_.size();
    if (!gzip_) {
      if (!buffer_.empty() && std::fwrite(buffer_.data(), 1, buffer_.size(), file_) != buffer_.size()) return WriteError();
      written_ += buffer_.size();
      buffer_.clear();
      return Status::Ok();
    }
    z_.next_in = reinterpret_cast<Bytef*>(buffer_.data());
    z_.avail_in = static_cast<uInt>(buffer_.size());
    int rc = Z_OK;
    do {
      z_.next_out = reinterpret_cast<Bytef*>(compressed_.data());
      z_.avail_out = static_cast<uInt>(compressed_.size());
      rc = deflate(&z_, flush);
      if (rc == Z_STREAM_ERROR) return RuntimeError("cannot compress '" + path_ + "', zlib stream error");
      const size_t have = compressed_.size() - z_.avail_out;
      if (have && std::fwrite(compressed_.data(), 1, have, file_) != have) return WriteError();
      written_ += have;
    } while (z_.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
    buffer_.clear();
    return Status::Ok();
  }
  Error WriteError() const {
    return RuntimeError("cannot write '" + path_ + "', " + std::strerror(errno) + ", check the disk space and the path");
  }

  std::FILE* file_;
  std::string path_;
  std::string buffer_;
  std::string compressed_;
  z_stream z_{};
  bool gzip_ = false, init_failed_ = false;
  uint64_t written_ = 0;       // bytes in the file
  uint64_t json_written_ = 0;  // JSON bytes before compression
};

void AppendUint(std::string& out, uint64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

// Nanoseconds as microseconds with three exact decimals.
void AppendMicros(std::string& out, int64_t ns) {
  if (ns < 0) {
    out += '-';
    ns = -ns;
  }
  AppendUint(out, static_cast<uint64_t>(ns) / 1000);
  uint32_t frac = static_cast<uint32_t>(static_cast<uint64_t>(ns) % 1000);
  out += '.';
  out += static_cast<char>('0' + frac / 100);
  out += static_cast<char>('0' + frac / 10 % 10);
  out += static_cast<char>('0' + frac % 10);
}

void AppendDouble(std::string& out, double v) {
  if (!std::isfinite(v)) v = 0;
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, 3);
  out.append(buf, r.ptr);
}

// The key of a span's argument in the event's args, by what the hook records
// in it (lib/trace/trace.h, namespace names); "arg" for user spans.
const char* ArgKey(const std::string& span_name) {
  static const std::pair<const char*, const char*> kKeys[] = {
      {names::kWait, "iteration_in_epoch"}, {names::kEpoch, "epoch"},          {names::kEpochEnd, "iterations"},
      {names::kFetch, "batch"},             {names::kGetitem, "sample"},       {names::kCollate, "batch"},
      {names::kPin, "batch"},               {names::kReadStorage, "read_bytes"}, {names::kReadCalls, "rchar_bytes"},
      {names::kSystemCpu, "system_cpu_ns"}, {names::kWorkerStart, "worker"}};
  for (const auto& [name, key] : kKeys)
    if (span_name == name) return key;
  return "arg";
}

// Writes each span as an event as it is decoded (none is kept); the metadata
// and sampler counters come from the Trace's small tables at the end.
class Exporter final : public SpanSink {
 public:
  explicit Exporter(Output& out) : out_(out) {}

  void Strings(const Trace& trace, uint32_t first_id) override {
    quoted_.resize(trace.strings.size());
    args_.resize(trace.strings.size());
    for (size_t id = first_id; id < trace.strings.size(); ++id) {
      quoted_[id].clear();
      AppendJsonString(quoted_[id], trace.strings[id]);
      args_[id] = fmt::format(R"(,"args":{{"{}":)", ArgKey(trace.strings[id]));
    }
    roles_.Strings(trace);
  }

  Status Spans(const Trace& trace, std::span<const DecodedSpan> spans) override {
    for (size_t t = ids_.size(); t < trace.threads.size(); ++t)
      ids_.push_back(fmt::format(R"(,"pid":{},"tid":{})", trace.threads[t].pid, trace.threads[t].tid));
    const uint64_t start_ns = trace.header.start_monotonic_ns;
    for (const DecodedSpan& d : spans) {
      const std::string& ids = ids_[d.thread];
      roles_.Observe(d.thread, d.name, d.scope, d.arg);
      std::string& b = Begin();
      b += R"({"name":)";
      b += quoted_[d.name];
      const int64_t ts = static_cast<int64_t>(d.start_ns - start_ns);
      if (d.kind == SpanKind::kCounter) {
        b += R"(,"ph":"C","ts":)";
        AppendMicros(b, ts);
        b += ids;
        b += R"(,"args":{"value":)";
        AppendUint(b, d.arg);
        b += "}}";
        stats.counters++;
        continue;
      }
      if (d.kind == SpanKind::kInstant) {
        b += R"(,"ph":"i","s":"t","ts":)";
        AppendMicros(b, ts);
        stats.instants++;
      } else {
        b += R"(,"ph":"X","ts":)";
        AppendMicros(b, ts);
        b += R"(,"dur":)";
        AppendMicros(b, static_cast<int64_t>(d.duration_ns));
        stats.spans++;
      }
      b += ids;
      b += args_[d.name];
      AppendUint(b, d.arg);
      if (d.scope) {
        b += R"(,"loader":)";
        AppendUint(b, d.scope);
      }
      if (d.has_cpu) {
        b += R"(,"cpu_us":)";
        AppendMicros(b, static_cast<int64_t>(d.cpu_ns));
        b += R"(,"runq_us":)";
        AppendMicros(b, static_cast<int64_t>(d.delay_ns));
      }
      b += "}}";
    }
    return out_.MaybeFlush();
  }

  // The process, thread and machine metadata and the sampler counters.
  void Finish(const Trace& trace) {
    start_ns_ = trace.header.start_monotonic_ns;
    Metadata(0, 0, "process_name", "machine " + trace.header.hostname + " (stallprof sampler)");
    for (const auto& p : trace.processes) {
      std::string label = p.comm.empty() ? "process" : p.comm;
      if (p.rank >= 0) label += fmt::format(" (rank {})", p.rank);
      Metadata(p.pid, 0, "process_name", label);
    }
    const std::vector<std::string> labels = roles_.Labels(trace);
    for (size_t t = 0; t < trace.threads.size(); ++t) Metadata(trace.threads[t].pid, trace.threads[t].tid, "thread_name", labels[t]);
    for (const auto& p : trace.process_series) ProcessCounters(p);
    SystemCounters(trace.system);
  }

  ExportStats stats;

 private:
  std::string& Begin() {
    std::string& b = out_.buffer();
    b += first_ ? "\n" : ",\n";
    first_ = false;
    return b;
  }

  void Metadata(uint32_t pid, uint32_t tid, const char* what, const std::string& name) {
    std::string& b = Begin();
    b += R"({"name":")";
    b += what;
    b += R"(","ph":"M","pid":)";
    AppendUint(b, pid);
    b += R"(,"tid":)";
    AppendUint(b, tid);
    b += R"(,"args":{"name":)";
    AppendJsonString(b, name);
    b += "}}";
    stats.metadata++;
  }

  void Counter(uint32_t pid, const char* name, uint64_t t, const char* key, double value) {
    std::string& b = Begin();
    b += R"({"name":")";
    b += name;
    b += R"(","ph":"C","ts":)";
    AppendMicros(b, static_cast<int64_t>(t - start_ns_));
    b += R"(,"pid":)";
    AppendUint(b, pid);
    b += R"(,"tid":0,"args":{")";
    b += key;
    b += "\":";
    AppendDouble(b, value);
    b += "}}";
    stats.counters++;
  }

  // Columns of equal length (the decoder checks).
  void ProcessCounters(const ProcessSeries& p) {
    for (size_t i = 0; i < p.t_ns.size(); ++i) {
      Counter(p.pid, "RSS", p.t_ns[i], "MiB", p.rss_bytes[i] / 1048576.0);
      if (i > 0 && p.t_ns[i - 1] > 0 && p.t_ns[i] > p.t_ns[i - 1] && p.cpu_ns[i] >= p.cpu_ns[i - 1])
        Counter(p.pid, "CPU", p.t_ns[i], "cores",
                static_cast<double>(p.cpu_ns[i] - p.cpu_ns[i - 1]) / (p.t_ns[i] - p.t_ns[i - 1]));
    }
  }

  void SystemCounters(const SystemSeries& s) {
    for (size_t i = 0; i < s.t_ns.size(); ++i) {
      const uint64_t t = s.t_ns[i];
      Counter(kMachinePid, "page cache", t, "MiB", s.page_cache_bytes[i] / 1048576.0);
      Counter(kMachinePid, "memory available", t, "MiB", s.mem_available_bytes[i] / 1048576.0);
      if (i > 0 && t > s.t_ns[i - 1] && s.cpu_total_ns[i] > s.cpu_total_ns[i - 1]) {
        Counter(kMachinePid, "machine CPU", t, "busy %",
                100.0 * static_cast<double>(s.cpu_busy_ns[i] - s.cpu_busy_ns[i - 1]) /
                    (s.cpu_total_ns[i] - s.cpu_total_ns[i - 1]));
        Counter(kMachinePid, "disk read", t, "MB/s",
                s.disk_read_bytes[i] >= s.disk_read_bytes[i - 1]
                    ? (s.disk_read_bytes[i] - s.disk_read_bytes[i - 1]) / 1e6 / ((t - s.t_ns[i - 1]) * 1e-9)
                    : 0);
      }
    }
  }

  Output& out_;
  bool first_ = true;
  uint64_t start_ns_ = 0;
  std::vector<std::string> quoted_;  // string id -> JSON string literal
  std::vector<std::string> ids_;     // thread id -> ,"pid":P,"tid":T
  std::vector<std::string> args_;    // string id -> ,"args":{"<its argument's key>":
  ThreadRoles roles_;
};

}  // namespace

Result<ExportStats> ExportChrome(const std::string& trace_path, const std::string& out_path) {
  auto reader = ChunkReader::Open(trace_path);
  if (!reader.ok()) return reader.error();
  const bool to_stdout = out_path == "-";
  const std::string partial = out_path + ".partial";
  std::FILE* file = to_stdout ? stdout : std::fopen(partial.c_str(), "wb");
  if (!file)
    return RuntimeError("cannot create '" + partial + "', " + std::strerror(errno) + ", choose a writable output with -o");
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> closer(to_stdout ? nullptr : file, &std::fclose);
  auto fail = [&](Error e) -> Result<ExportStats> {
    if (!to_stdout) {
      closer.reset();
      std::remove(partial.c_str());
    }
    return e;
  };
  const bool gzip = !to_stdout && out_path.ends_with(".gz");
  Output out(file, to_stdout ? "stdout" : partial, gzip ? Output::Compression::kGzip : Output::Compression::kNone);
  Exporter exporter(out);
  out.buffer() += R"({"displayTimeUnit":"ms","traceEvents":[)";
  Trace trace;  // everything but the spans, which go straight out
  if (Status s = DecodeChunks(**reader, trace, exporter); !s.ok()) return fail(s.error());
  exporter.Finish(trace);
  out.buffer() += "\n]}\n";
  if (Status s = out.Finish(); !s.ok()) return fail(s.error());
  if (std::fflush(file) != 0) return fail(RuntimeError("cannot write '" + partial + "', " + std::strerror(errno) + ", check the disk space"));
  ExportStats stats = exporter.stats;
  stats.truncated = (*reader)->truncated();
  stats.bytes_written = out.written();
  stats.json_bytes = out.json_bytes();
  stats.gzip = gzip;
  if (!to_stdout) {
    closer.reset();
    if (std::rename(partial.c_str(), out_path.c_str()) != 0)
      return fail(RuntimeError("cannot rename '" + partial + "' to '" + out_path + "', " + std::strerror(errno) + ", check the directory"));
  }
  return stats;
}

}  // namespace stallprof::report
