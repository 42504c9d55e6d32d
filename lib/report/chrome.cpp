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

#include "json_writer.h"
#include "trace/decoder.h"
#include "trace/reader.h"

namespace stallprof::report {

namespace {

constexpr size_t kFlushBytes = 1 << 20;
constexpr uint32_t kMachinePid = 0;  // pseudo process holding the machine-wide sampler counters

class Output {
 public:
  Output(std::FILE* file, std::string path) : file_(file), path_(std::move(path)) { buffer_.reserve(kFlushBytes + 4096); }
  std::string& buffer() { return buffer_; }
  Status MaybeFlush() { return buffer_.size() >= kFlushBytes ? Flush() : Status::Ok(); }
  Status Flush() {
    if (!buffer_.empty() && std::fwrite(buffer_.data(), 1, buffer_.size(), file_) != buffer_.size())
      return RuntimeError("cannot write '" + path_ + "', " + std::strerror(errno) + ", check the disk space and the path");
    written_ += buffer_.size();
    buffer_.clear();
    return Status::Ok();
  }
  uint64_t written() const { return written_ + buffer_.size(); }

 private:
  std::FILE* file_;
  std::string path_;
  std::string buffer_;
  uint64_t written_ = 0;
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

// Writes each span as an event as it is decoded (none is kept); the metadata
// and sampler counters come from the Trace's small tables at the end.
class Exporter final : public SpanSink {
 public:
  explicit Exporter(Output& out) : out_(out) {}

  void Strings(const Trace& trace, uint32_t first_id) override {
    quoted_.resize(trace.strings.size());
    for (size_t id = first_id; id < trace.strings.size(); ++id) {
      quoted_[id].clear();
      AppendJsonString(quoted_[id], trace.strings[id]);
    }
  }

  Status Spans(const Trace& trace, std::span<const DecodedSpan> spans) override {
    for (size_t t = ids_.size(); t < trace.threads.size(); ++t)
      ids_.push_back(fmt::format(R"(,"pid":{},"tid":{})", trace.threads[t].pid, trace.threads[t].tid));
    const uint64_t start_ns = trace.header.start_monotonic_ns;
    for (const DecodedSpan& d : spans) {
      const std::string& ids = ids_[d.thread];
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
      b += R"(,"args":{"arg":)";
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
    for (const auto& t : trace.threads)
      Metadata(t.pid, t.tid, "thread_name", t.name.empty() ? fmt::format("thread {}", t.tid) : t.name);
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
  Output out(file, to_stdout ? "stdout" : partial);
  Exporter exporter(out);
  out.buffer() += R"({"displayTimeUnit":"ms","traceEvents":[)";
  Trace trace;  // everything but the spans, which go straight out
  if (Status s = DecodeChunks(**reader, trace, exporter); !s.ok()) return fail(s.error());
  exporter.Finish(trace);
  out.buffer() += "\n]}\n";
  if (Status s = out.Flush(); !s.ok()) return fail(s.error());
  if (std::fflush(file) != 0) return fail(RuntimeError("cannot write '" + partial + "', " + std::strerror(errno) + ", check the disk space"));
  ExportStats stats = exporter.stats;
  stats.truncated = (*reader)->truncated();
  stats.bytes_written = out.written();
  if (!to_stdout) {
    closer.reset();
    if (std::rename(partial.c_str(), out_path.c_str()) != 0)
      return fail(RuntimeError("cannot rename '" + partial + "' to '" + out_path + "', " + std::strerror(errno) + ", check the directory"));
  }
  return stats;
}

}  // namespace stallprof::report
