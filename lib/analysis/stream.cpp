// LoadForAnalysis: trace.pb streamed into a TraceDigest (see analysis.h).
#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "analysis.h"
#include "internal.h"
#include "trace/reader.h"

namespace stallprof::analysis {

namespace {

inline bool ReadVarint(const uint8_t*& p, const uint8_t* end, uint64_t& v) {
  if (p < end && *p < 0x80) {
    v = *p++;
    return true;
  }
  uint64_t r = 0;
  for (int shift = 0; p < end && shift < 64; shift += 7) {
    uint8_t b = *p++;
    r |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      v = r;
      return true;
    }
  }
  return false;
}

// A packed column of a SpanBatch encoding.
struct Column {
  const uint8_t* begin = nullptr;
  const uint8_t* end = nullptr;
  // Number of varints; -1 when the last one is unterminated.
  int64_t Count() const {
    int64_t n = 0;
    for (const uint8_t* p = begin; p < end; ++p) n += (*p < 0x80);
    if (begin < end && end[-1] >= 0x80) return -1;
    return n;
  }
};

class DigestBuilder {
 public:
  DigestBuilder(TraceDigest& digest, const ChunkReader& reader) : d_(digest), t_(digest.trace), r_(reader) {}

  Status Chunk(const pb::Chunk& c) {
    if (!seen_header_ && c.body_case() != pb::Chunk::kHeader) return Corrupt("the first chunk is not the header");
    switch (c.body_case()) {
      case pb::Chunk::kHeader: return Header(c.header());
      case pb::Chunk::kStrings: return Strings(c.strings());
      case pb::Chunk::kProcess: return Process(c.process());
      case pb::Chunk::kThread: return Thread(c.thread());
      case pb::Chunk::kSpans: return Spans(c.spans());
      case pb::Chunk::kConfig: return Config(c.config());
      case pb::Chunk::kProcessSamples: return ProcessSamples(c.process_samples());
      case pb::Chunk::kSystemSamples: return SystemSamples(c.system_samples());
      case pb::Chunk::kDrops: return Drops(c.drops());
      case pb::Chunk::kFooter: return Footer(c.footer());
      case pb::Chunk::BODY_NOT_SET: return Status::Ok();  // a newer minor version's chunk kind
    }
    return Status::Ok();
  }

  bool seen_header() const { return seen_header_; }

  // A chunk as read from the file: span batches are decoded straight from
  // their encoding (no protobuf objects), everything else through pb::Chunk.
  Status RawChunk(std::string_view bytes) {
    const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
    const auto* end = p + bytes.size();
    if (p < end && *p == 0x2A && seen_header_) {  // field 5 (spans), length-delimited
      const uint8_t* q = p + 1;
      uint64_t len = 0;
      if (ReadVarint(q, end, len) && len == static_cast<uint64_t>(end - q)) return RawSpans(q, end);
    }
    if (!chunk_.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return Corrupt("a chunk does not parse");
    return Chunk(chunk_);
  }

 private:
  Error Corrupt(const std::string& why) const { return CorruptTraceError(t_.path, r_.chunk_offset(), why); }

  Status Header(const pb::TraceHeader& h) {
    if (seen_header_) return Corrupt("a second header chunk");
    if (auto s = CheckTraceVersion(t_.path, h); !s.ok()) return s;
    seen_header_ = true;
    auto& o = t_.header;
    o.version_major = h.version_major();
    o.version_minor = h.version_minor();
    o.tool_version = h.tool_version();
    o.command.assign(h.command().begin(), h.command().end());
    o.hostname = h.hostname();
    o.kernel = h.kernel();
    o.cwd = h.cwd();
    o.usable_cores = h.usable_cores();
    o.online_cores = h.online_cores();
    o.memory_bytes = h.memory_bytes();
    o.start_monotonic_ns = h.start_monotonic_ns();
    o.start_realtime_ns = h.start_realtime_ns();
    o.page_cache_bytes = h.page_cache_bytes();
    o.ring_bytes = h.ring_bytes();
    o.ring_lanes = h.ring_lanes();
    o.sample_period_ms = h.sample_period_ms();
    o.clock_resolution_ns = h.clock_resolution_ns();
    o.run_id = h.run_id();
    return Status::Ok();
  }

  Status Strings(const pb::Strings& s) {
    if (s.first_id() != t_.strings.size())
      return Corrupt(fmt::format("strings start at id {} where {} was expected", s.first_id(), t_.strings.size()));
    for (const auto& v : s.value()) {
      // Spans analysis reads one by one; all others become stage totals.
      bool kept = v == names::kWait || v == names::kEpoch || v == names::kEpochEnd || v == names::kFetch ||
                  v == names::kWorkerStart;
      keep_.push_back(kept);
      t_.strings.push_back(v);
    }
    return Status::Ok();
  }

  Status Process(const pb::ProcessInfo& p) {
    if (t_.FindProcess(p.pid())) return Status::Ok();  // seen again (e.g. after exec): first record wins
    ProcessInfo o;
    o.pid = p.pid();
    o.ppid = p.ppid();
    o.rank = p.rank();
    o.local_rank = p.local_rank();
    o.world_size = p.world_size();
    o.comm = p.comm();
    o.cmdline.assign(p.cmdline().begin(), p.cmdline().end());
    o.first_seen_ns = p.first_seen_ns();
    t_.processes.push_back(std::move(o));
    return Status::Ok();
  }

  Status Thread(const pb::ThreadInfo& th) {
    if (th.thread_id() != t_.threads.size())
      return Corrupt(fmt::format("thread id {} where {} was expected", th.thread_id(), t_.threads.size()));
    if (th.name() >= t_.strings.size()) return Corrupt(fmt::format("thread name id {} is undefined", th.name()));
    if (th.client() > static_cast<uint32_t>(ClientKind::kPythonCtypes))
      return Corrupt(fmt::format("unknown client kind {}", th.client()));
    ThreadInfo o;
    o.pid = th.pid();
    o.tid = th.tid();
    o.lane = th.lane();
    o.lane_generation = th.lane_generation();
    o.name = t_.strings[th.name()];
    o.client = static_cast<ClientKind>(th.client());
    t_.threads.push_back(std::move(o));
    return Status::Ok();
  }

  Status Config(const pb::Config& c) {
    if (c.key() >= t_.strings.size()) return Corrupt(fmt::format("config key id {} is undefined", c.key()));
    if (c.scope() > UINT16_MAX) return Corrupt(fmt::format("config scope {} is out of range", c.scope()));
    ConfigValue o;
    o.pid = c.pid();
    o.scope = static_cast<uint16_t>(c.scope());
    o.key = t_.strings[c.key()];
    switch (c.value_case()) {
      case pb::Config::kU64: o.type = ConfigValue::Type::kU64; o.u64 = c.u64(); break;
      case pb::Config::kF64: o.type = ConfigValue::Type::kF64; o.f64 = c.f64(); break;
      case pb::Config::kStr: o.type = ConfigValue::Type::kStr; o.str = c.str(); break;
      case pb::Config::VALUE_NOT_SET: return Corrupt("a config value is missing");
    }
    t_.configs.push_back(std::move(o));
    return Status::Ok();
  }

  Status Spans(const pb::SpanBatch& b) {
    const int n = b.duration_ns_size();
    if (n == 0) return Status::Ok();
    const uint32_t thread = b.thread_id();
    if (thread >= t_.threads.size()) return Corrupt(fmt::format("spans of undefined thread {}", thread));
    auto collapsible = [n](int c, bool may_omit) { return c == n || c == 1 || (may_omit && c == 0); };
    if (b.start_delta_ns_size() != n || b.arg_size() != n || !collapsible(b.name_size(), false) ||
        !collapsible(b.scope_size(), true) || !collapsible(b.kind_size(), true) || b.cpu_ns_size() != b.delay_ns_size() ||
        (b.has_cpu_bits_size() != 0 && b.has_cpu_bits_size() != (n + 63) / 64))
      return Corrupt("span batch columns differ in length");
    auto& s = t_.spans;
    uint64_t prev_end = b.base_ns();
    int cpu_index = 0;
    const uint32_t strings = static_cast<uint32_t>(t_.strings.size());
    for (int i = 0; i < n; ++i) {
      const uint64_t duration = b.duration_ns(i);
      const uint64_t start = prev_end + static_cast<uint64_t>(b.start_delta_ns(i));
      prev_end = start + duration;
      const uint32_t name = b.name(b.name_size() == 1 ? 0 : i);
      if (name >= strings) return Corrupt(fmt::format("a span names undefined string {}", name));
      const uint32_t scope_raw = b.scope_size() == 0 ? 0 : b.scope(b.scope_size() == 1 ? 0 : i);
      if (scope_raw > UINT16_MAX) return Corrupt(fmt::format("a span scope {} is out of range", scope_raw));
      const uint16_t scope = static_cast<uint16_t>(scope_raw);
      const uint32_t kind = b.kind_size() == 0 ? 1 : b.kind(b.kind_size() == 1 ? 0 : i);
      if (kind != 1 && kind != 4 && kind != 5) return Corrupt(fmt::format("a span has unknown kind {}", kind));
      const bool has_cpu = b.has_cpu_bits_size() > 0 && (b.has_cpu_bits(i / 64) >> (i % 64) & 1);
      uint64_t cpu = 0, delay = 0;
      if (has_cpu) {
        if (cpu_index >= b.cpu_ns_size()) return Corrupt("a span batch has fewer CPU entries than has_cpu bits");
        cpu = b.cpu_ns(cpu_index);
        delay = b.delay_ns(cpu_index);
        cpu_index++;
      }
      if (keep_[name]) {
        s.start_ns.push_back(start);
        s.duration_ns.push_back(duration);
        s.cpu_ns.push_back(cpu);
        s.delay_ns.push_back(delay);
        s.arg.push_back(b.arg(i));
        s.name.push_back(name);
        s.thread.push_back(thread);
        s.scope.push_back(scope);
        s.kind.push_back(static_cast<SpanKind>(kind));
        s.has_cpu.push_back(has_cpu);
        continue;
      }
      if (kind == 1) Fold(thread, name, scope, start, duration, has_cpu, cpu);
    }
    return Status::Ok();
  }

  Status RawSpans(const uint8_t* p, const uint8_t* end) {
    uint64_t thread_id = 0, base_ns = 0;
    Column col[12];
    bool seen[12] = {};
    while (p < end) {
      uint64_t tag = 0;
      if (!ReadVarint(p, end, tag)) return Corrupt("a span batch has a bad field tag");
      const uint64_t field = tag >> 3;
      switch (tag & 7) {
        case 0: {
          uint64_t v = 0;
          if (!ReadVarint(p, end, v)) return Corrupt("a span batch has a bad varint");
          if (field == 1) thread_id = v;
          else if (field == 2) base_ns = v;
          else if (field >= 3 && field <= 11) return Corrupt("a span batch column is not packed");
          break;
        }
        case 2: {
          uint64_t len = 0;
          if (!ReadVarint(p, end, len) || len > static_cast<uint64_t>(end - p)) return Corrupt("a span batch field overruns the chunk");
          if (field >= 3 && field <= 11) {
            if (seen[field]) return Corrupt("a span batch column appears twice");
            seen[field] = true;
            col[field] = {p, p + len};
          }
          p += len;
          break;
        }
        case 1:
          if (end - p < 8) return Corrupt("a span batch field overruns the chunk");
          p += 8;
          break;
        case 5:
          if (end - p < 4) return Corrupt("a span batch field overruns the chunk");
          p += 4;
          break;
        default: return Corrupt("a span batch has an unknown wire type");
      }
    }
    enum { kStart = 3, kDuration = 4, kName = 5, kArg = 6, kScope = 7, kKind = 8, kCpuBits = 9, kCpu = 10, kDelay = 11 };
    const int64_t n = col[kDuration].Count();
    if (n < 0) return Corrupt("a span batch column ends inside a number");
    if (n == 0) return Status::Ok();
    if (thread_id >= t_.threads.size()) return Corrupt(fmt::format("spans of undefined thread {}", thread_id));
    const int64_t n_name = col[kName].Count(), n_scope = col[kScope].Count(), n_kind = col[kKind].Count();
    const int64_t n_bits = col[kCpuBits].Count(), n_cpu = col[kCpu].Count(), n_delay = col[kDelay].Count();
    auto counts_ok = [n](int64_t c, bool may_omit) { return c == n || c == 1 || (may_omit && c == 0); };
    if (col[kStart].Count() != n || col[kArg].Count() != n || !counts_ok(n_name, false) || !counts_ok(n_scope, true) ||
        !counts_ok(n_kind, true) || n_cpu < 0 || n_delay != n_cpu || (n_bits != 0 && n_bits != (n + 63) / 64))
      return Corrupt("span batch columns differ in length");
    const uint32_t thread = static_cast<uint32_t>(thread_id);
    const uint32_t strings = static_cast<uint32_t>(t_.strings.size());
    const uint8_t *q_start = col[kStart].begin, *q_dur = col[kDuration].begin, *q_name = col[kName].begin;
    const uint8_t *q_arg = col[kArg].begin, *q_scope = col[kScope].begin, *q_kind = col[kKind].begin;
    const uint8_t *q_bits = col[kCpuBits].begin, *q_cpu = col[kCpu].begin, *q_delay = col[kDelay].begin;
    uint64_t name = 0, scope = 0, kind = 1, bits = 0, cpu_left = static_cast<uint64_t>(n_cpu);
    uint64_t prev_end = base_ns;
    auto& s = t_.spans;
    for (int64_t i = 0; i < n; ++i) {
      uint64_t z = 0, duration = 0, arg = 0;
      ReadVarint(q_start, col[kStart].end, z);  // counts were verified above
      ReadVarint(q_dur, col[kDuration].end, duration);
      ReadVarint(q_arg, col[kArg].end, arg);
      const uint64_t start = prev_end + ((z >> 1) ^ (~(z & 1) + 1));  // zigzag
      prev_end = start + duration;
      if (i < n_name) {
        ReadVarint(q_name, col[kName].end, name);
        if (name >= strings) return Corrupt(fmt::format("a span names undefined string {}", name));
      }
      if (i < n_scope) {
        ReadVarint(q_scope, col[kScope].end, scope);
        if (scope > UINT16_MAX) return Corrupt(fmt::format("a span scope {} is out of range", scope));
      }
      if (i < n_kind) {
        ReadVarint(q_kind, col[kKind].end, kind);
        if (kind != 1 && kind != 4 && kind != 5) return Corrupt(fmt::format("a span has unknown kind {}", kind));
      }
      if (n_bits && i % 64 == 0) ReadVarint(q_bits, col[kCpuBits].end, bits);
      const bool has_cpu = n_bits && (bits >> (i % 64) & 1);
      uint64_t cpu = 0, delay = 0;
      if (has_cpu) {
        if (cpu_left == 0) return Corrupt("a span batch has fewer CPU entries than has_cpu bits");
        ReadVarint(q_cpu, col[kCpu].end, cpu);
        ReadVarint(q_delay, col[kDelay].end, delay);
        cpu_left--;
      }
      if (keep_[name]) {
        s.start_ns.push_back(start);
        s.duration_ns.push_back(duration);
        s.cpu_ns.push_back(cpu);
        s.delay_ns.push_back(delay);
        s.arg.push_back(arg);
        s.name.push_back(static_cast<uint32_t>(name));
        s.thread.push_back(thread);
        s.scope.push_back(static_cast<uint16_t>(scope));
        s.kind.push_back(static_cast<SpanKind>(kind));
        s.has_cpu.push_back(has_cpu);
        continue;
      }
      if (kind == 1) Fold(thread, static_cast<uint32_t>(name), static_cast<uint16_t>(scope), start, duration, has_cpu, cpu);
    }
    return Status::Ok();
  }

  void Fold(uint32_t thread, uint32_t name, uint16_t scope, uint64_t start, uint64_t duration, bool has_cpu, uint64_t cpu) {
    const internal::StageKey key{(uint64_t{thread} << 32) | name, scope};
    if (!(key == last_key_)) {
      auto [it, inserted] = index_.try_emplace(key, static_cast<uint32_t>(d_.stages.size()));
      if (inserted) {
        d_.stages.emplace_back();
        d_.stages.back().thread = thread;
        d_.stages.back().name = name;
        d_.stages.back().scope = scope;
      }
      last_key_ = key;
      last_index_ = it->second;
    }
    auto& st = d_.stages[last_index_];
    st.count++;
    st.wall_ns += duration;
    if (has_cpu) {
      st.count_with_cpu++;
      st.cpu_ns += cpu;
    }
    st.first_start = std::min(st.first_start, start);
    st.last_end = std::max(st.last_end, start + duration);
  }

  Status ProcessSamples(const pb::ProcessSamples& s) {
    const int n = s.t_ns_size();
    if (s.cpu_ns_size() != n || s.read_bytes_size() != n || s.rchar_size() != n || s.rss_bytes_size() != n ||
        s.delay_ns_size() != n || s.threads_size() != n)
      return Corrupt("process sample columns differ in length");
    ProcessSeries* series = nullptr;
    for (auto& ps : t_.process_series)
      if (ps.pid == s.pid()) series = &ps;
    if (!series) {
      t_.process_series.emplace_back();
      series = &t_.process_series.back();
      series->pid = s.pid();
    }
    series->t_ns.insert(series->t_ns.end(), s.t_ns().begin(), s.t_ns().end());
    series->cpu_ns.insert(series->cpu_ns.end(), s.cpu_ns().begin(), s.cpu_ns().end());
    series->read_bytes.insert(series->read_bytes.end(), s.read_bytes().begin(), s.read_bytes().end());
    series->rchar.insert(series->rchar.end(), s.rchar().begin(), s.rchar().end());
    series->rss_bytes.insert(series->rss_bytes.end(), s.rss_bytes().begin(), s.rss_bytes().end());
    series->delay_ns.insert(series->delay_ns.end(), s.delay_ns().begin(), s.delay_ns().end());
    series->threads.insert(series->threads.end(), s.threads().begin(), s.threads().end());
    return Status::Ok();
  }

  Status SystemSamples(const pb::SystemSamples& s) {
    const int n = s.t_ns_size();
    if (s.cpu_busy_ns_size() != n || s.cpu_total_ns_size() != n || s.page_cache_bytes_size() != n ||
        s.disk_read_bytes_size() != n || s.mem_available_bytes_size() != n)
      return Corrupt("system sample columns differ in length");
    auto& o = t_.system;
    o.t_ns.insert(o.t_ns.end(), s.t_ns().begin(), s.t_ns().end());
    o.cpu_busy_ns.insert(o.cpu_busy_ns.end(), s.cpu_busy_ns().begin(), s.cpu_busy_ns().end());
    o.cpu_total_ns.insert(o.cpu_total_ns.end(), s.cpu_total_ns().begin(), s.cpu_total_ns().end());
    o.page_cache_bytes.insert(o.page_cache_bytes.end(), s.page_cache_bytes().begin(), s.page_cache_bytes().end());
    o.disk_read_bytes.insert(o.disk_read_bytes.end(), s.disk_read_bytes().begin(), s.disk_read_bytes().end());
    o.mem_available_bytes.insert(o.mem_available_bytes.end(), s.mem_available_bytes().begin(), s.mem_available_bytes().end());
    return Status::Ok();
  }

  Status Drops(const pb::LaneDrops& dr) {
    if (dr.thread_id() >= t_.threads.size()) return Corrupt(fmt::format("drops name undefined thread {}", dr.thread_id()));
    auto& th = t_.threads[dr.thread_id()];
    th.dropped = std::max(th.dropped, dr.dropped());
    return Status::Ok();
  }

  Status Footer(const pb::TraceFooter& f) {
    TraceFooter o;
    o.exit_code = f.exit_code();
    o.term_signal = f.term_signal();
    o.end_monotonic_ns = f.end_monotonic_ns();
    o.spans = f.spans();
    o.dropped = f.dropped();
    o.invalid_records = f.invalid_records();
    t_.footer = o;
    return Status::Ok();
  }

  TraceDigest& d_;
  Trace& t_;
  const ChunkReader& r_;
  bool seen_header_ = false;
  std::vector<bool> keep_{false};  // per string id
  std::unordered_map<internal::StageKey, uint32_t, internal::StageKeyHash> index_;
  internal::StageKey last_key_{UINT64_MAX, 0};
  uint32_t last_index_ = 0;
  pb::Chunk chunk_;
};

}  // namespace

Result<TraceDigest> LoadForAnalysis(const std::string& path) {
  auto reader = ChunkReader::Open(path);
  if (!reader.ok()) return reader.error();
  TraceDigest digest;
  digest.trace.path = path;
  digest.trace.bytes = (*reader)->file_size();
  digest.trace.strings.push_back("");
  DigestBuilder builder(digest, **reader);
  std::string_view bytes;
  for (;;) {
    auto more = (*reader)->NextRaw(bytes);
    if (!more.ok()) return more.error();
    if (!*more) break;
    if (Status s = builder.RawChunk(bytes); !s.ok()) return s.error();
  }
  if (!builder.seen_header())
    return InputError(fmt::format("trace '{}' has no header chunk, the run stopped before it started recording "
                                  "(or this is not a complete trace), re-record the run",
                                  path));
  digest.trace.truncated = (*reader)->truncated();
  return digest;
}

}  // namespace stallprof::analysis
