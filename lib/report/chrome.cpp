#include "chrome.h"

#include <fmt/format.h>

#include <charconv>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <memory>
#include <unordered_map>
#include <vector>

#include "json_writer.h"
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

struct ThreadRef {
  std::string ids;  // ,"pid":P,"tid":T}
  uint32_t pid = 0;
};

class Exporter {
 public:
  explicit Exporter(Output& out) : out_(out) {}

  Status Chunk(const pb::Chunk& c) {
    switch (c.body_case()) {
      case pb::Chunk::kHeader: start_ns_ = c.header().start_monotonic_ns(); Machine(c.header()); break;
      case pb::Chunk::kStrings: Strings(c.strings()); break;
      case pb::Chunk::kProcess: Process(c.process()); break;
      case pb::Chunk::kThread: Thread(c.thread()); break;
      case pb::Chunk::kSpans: Spans(c.spans()); break;
      case pb::Chunk::kProcessSamples: ProcessSamples(c.process_samples()); break;
      case pb::Chunk::kSystemSamples: SystemSamples(c.system_samples()); break;
      default: break;
    }
    return out_.MaybeFlush();
  }

  ExportStats stats;

 private:
  std::string& Begin() {
    std::string& b = out_.buffer();
    b += first_ ? "\n" : ",\n";
    first_ = false;
    return b;
  }

  const std::string& Name(uint32_t id) {
    static const std::string unknown = "?";
    return id < names_.size() ? names_[id] : unknown;
  }

  void Machine(const pb::TraceHeader& h) {
    std::string& b = Begin();
    b += R"({"name":"process_name","ph":"M","pid":0,"tid":0,"args":{"name":)";
    AppendJsonString(b, "machine " + h.hostname() + " (stallprof sampler)");
    b += "}}";
    stats.metadata++;
  }

  void Strings(const pb::Strings& s) {
    uint32_t id = s.first_id();
    for (const auto& v : s.value()) {
      if (id >= names_.size()) {
        names_.resize(id + 1);
        quoted_.resize(id + 1);
      }
      names_[id] = v;
      quoted_[id].clear();
      AppendJsonString(quoted_[id], v);
      ++id;
    }
  }

  void Process(const pb::ProcessInfo& p) {
    std::string& b = Begin();
    b += R"({"name":"process_name","ph":"M","pid":)";
    AppendUint(b, p.pid());
    b += R"(,"tid":0,"args":{"name":)";
    std::string label = p.comm().empty() ? "process" : p.comm();
    if (p.rank() >= 0) label += fmt::format(" (rank {})", p.rank());
    AppendJsonString(b, label);
    b += "}}";
    stats.metadata++;
  }

  void Thread(const pb::ThreadInfo& t) {
    if (t.thread_id() >= threads_.size()) threads_.resize(t.thread_id() + 1);
    auto& ref = threads_[t.thread_id()];
    ref.pid = t.pid();
    ref.ids = fmt::format(R"(,"pid":{},"tid":{})", t.pid(), t.tid());
    std::string& b = Begin();
    b += R"({"name":"thread_name","ph":"M")";
    b += ref.ids;
    b += R"(,"args":{"name":)";
    AppendJsonString(b, Name(t.name()).empty() || t.name() == 0 ? fmt::format("thread {}", t.tid()) : Name(t.name()));
    b += "}}";
    stats.metadata++;
  }

  void Spans(const pb::SpanBatch& batch) {
    static const std::string unknown_thread = R"(,"pid":0,"tid":0)";
    const std::string& ids = batch.thread_id() < threads_.size() ? threads_[batch.thread_id()].ids : unknown_thread;
    const int n = batch.duration_ns_size();
    if (batch.start_delta_ns_size() != n || batch.arg_size() != n) return;  // the reader rejects these in LoadTrace
    static const std::string unknown_name = "\"?\"";
    uint64_t prev_end = batch.base_ns();
    int cpu_index = 0;
    for (int i = 0; i < n; ++i) {
      const uint64_t duration = batch.duration_ns(i);
      const uint64_t start = prev_end + static_cast<uint64_t>(batch.start_delta_ns(i));
      prev_end = start + duration;
      const uint32_t name = batch.name_size() == 0 ? 0 : batch.name(batch.name_size() == 1 ? 0 : i);
      const uint32_t scope = batch.scope_size() == 0 ? 0 : batch.scope(batch.scope_size() == 1 ? 0 : i);
      const uint32_t kind = batch.kind_size() == 0 ? 1 : batch.kind(batch.kind_size() == 1 ? 0 : i);
      const bool has_cpu = i / 64 < batch.has_cpu_bits_size() && (batch.has_cpu_bits(i / 64) >> (i % 64) & 1);
      const std::string& quoted = name < quoted_.size() && !quoted_[name].empty() ? quoted_[name] : unknown_name;
      std::string& b = Begin();
      b += R"({"name":)";
      b += quoted;
      const int64_t ts = static_cast<int64_t>(start - start_ns_);
      if (kind == 5) {
        b += R"(,"ph":"C","ts":)";
        AppendMicros(b, ts);
        b += ids;
        b += R"(,"args":{"value":)";
        AppendUint(b, batch.arg(i));
        b += "}}";
        stats.counters++;
        continue;
      }
      if (kind == 4) {
        b += R"(,"ph":"i","s":"t","ts":)";
        AppendMicros(b, ts);
        stats.instants++;
      } else {
        b += R"(,"ph":"X","ts":)";
        AppendMicros(b, ts);
        b += R"(,"dur":)";
        AppendMicros(b, static_cast<int64_t>(duration));
        stats.spans++;
      }
      b += ids;
      b += R"(,"args":{"arg":)";
      AppendUint(b, batch.arg(i));
      if (scope) {
        b += R"(,"loader":)";
        AppendUint(b, scope);
      }
      if (has_cpu && cpu_index < batch.cpu_ns_size() && cpu_index < batch.delay_ns_size()) {
        b += R"(,"cpu_us":)";
        AppendMicros(b, static_cast<int64_t>(batch.cpu_ns(cpu_index)));
        b += R"(,"runq_us":)";
        AppendMicros(b, static_cast<int64_t>(batch.delay_ns(cpu_index)));
        cpu_index++;
      }
      b += "}}";
    }
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

  void ProcessSamples(const pb::ProcessSamples& p) {
    const int n = p.t_ns_size();
    for (int i = 0; i < n; ++i) {
      if (p.rss_bytes_size() == n) Counter(p.pid(), "RSS", p.t_ns(i), "MiB", p.rss_bytes(i) / 1048576.0);
      if (p.cpu_ns_size() == n) {
        auto& last = last_process_[p.pid()];
        if (last.first > 0 && p.t_ns(i) > last.first && p.cpu_ns(i) >= last.second)
          Counter(p.pid(), "CPU", p.t_ns(i), "cores", static_cast<double>(p.cpu_ns(i) - last.second) / (p.t_ns(i) - last.first));
        last = {p.t_ns(i), p.cpu_ns(i)};
      }
    }
  }

  void SystemSamples(const pb::SystemSamples& s) {
    const int n = s.t_ns_size();
    for (int i = 0; i < n; ++i) {
      const uint64_t t = s.t_ns(i);
      if (s.page_cache_bytes_size() == n) Counter(kMachinePid, "page cache", t, "MiB", s.page_cache_bytes(i) / 1048576.0);
      if (s.mem_available_bytes_size() == n) Counter(kMachinePid, "memory available", t, "MiB", s.mem_available_bytes(i) / 1048576.0);
      if (s.cpu_busy_ns_size() == n && s.cpu_total_ns_size() == n && s.disk_read_bytes_size() == n) {
        if (have_system_ && t > last_t_ && s.cpu_total_ns(i) > last_total_) {
          Counter(kMachinePid, "machine CPU", t, "busy %",
                  100.0 * static_cast<double>(s.cpu_busy_ns(i) - last_busy_) / (s.cpu_total_ns(i) - last_total_));
          Counter(kMachinePid, "disk read", t, "MB/s",
                  s.disk_read_bytes(i) >= last_disk_ ? (s.disk_read_bytes(i) - last_disk_) / 1e6 / ((t - last_t_) * 1e-9) : 0);
        }
        have_system_ = true;
        last_t_ = t;
        last_busy_ = s.cpu_busy_ns(i);
        last_total_ = s.cpu_total_ns(i);
        last_disk_ = s.disk_read_bytes(i);
      }
    }
  }

  Output& out_;
  bool first_ = true;
  uint64_t start_ns_ = 0;
  std::vector<std::string> names_{""};
  std::vector<std::string> quoted_{"\"\""};
  std::vector<ThreadRef> threads_;
  std::unordered_map<uint32_t, std::pair<uint64_t, uint64_t>> last_process_;
  bool have_system_ = false;
  uint64_t last_t_ = 0, last_busy_ = 0, last_total_ = 0, last_disk_ = 0;
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
  pb::Chunk chunk;
  while (true) {
    auto more = (*reader)->Next(chunk);
    if (!more.ok()) return fail(more.error());
    if (!*more) break;
    if (Status s = exporter.Chunk(chunk); !s.ok()) return fail(s.error());
  }
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
