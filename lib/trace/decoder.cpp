#include "decoder.h"

#include <fmt/core.h>

#include <algorithm>
#include <bit>
#include <cstring>

namespace stallprof {
namespace {

// Always inlined: it runs ~9 times per span, and a call per varint costs ~10%.
[[gnu::always_inline]] inline bool ReadVarint(const uint8_t*& p, const uint8_t* end, uint64_t& v) {
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

// Packs the 7-bit groups of a varint's bytes (top bits clear) into one number:
// a bit extract (pext) where the CPU has a fast one, else shifts and masks.
// pext is written as inline assembly, so the compiler needs no target flag;
// it runs only where PextIsFast() said so.
template <bool kPext>
[[gnu::always_inline]] inline uint64_t PackVarintGroups(uint64_t x) {
#if defined(__x86_64__)
  if constexpr (kPext) {
    uint64_t packed;
    asm("pextq %2, %1, %0" : "=r"(packed) : "r"(x), "r"(0x7f7f7f7f7f7f7f7full));
    return packed;
  }
#endif
  x = ((x & 0x7f007f007f007f00ull) >> 1) | (x & 0x007f007f007f007full);  // 14 bits per 16
  x = ((x & 0x3fff00003fff0000ull) >> 2) | (x & 0x00003fff00003fffull);  // 28 bits per 32
  x = ((x & 0x0fffffff00000000ull) >> 4) | (x & 0x000000000fffffffull);  // 56 bits
  return x;
}

}  // namespace

namespace decoder_internal {

bool PextIsFast() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  return __builtin_cpu_supports("bmi2") && !__builtin_cpu_is("znver1") && !__builtin_cpu_is("znver2") &&
         !__builtin_cpu_is("amdfam15h") && !__builtin_cpu_is("amdfam17h");
#else
  return false;
#endif
}

uint64_t PackVarintGroupsWith(bool pext, uint64_t groups) {
  return pext ? PackVarintGroups<true>(groups) : PackVarintGroups<false>(groups);
}

}  // namespace decoder_internal

namespace {

// A varint of a packed column whose varints were counted (Packed::Count), so
// none runs past `column_end`. Where 8 bytes can be loaded without passing
// `readable` (the end of the batch, which holds the column), a varint of up to
// 8 bytes is decoded without a branch per byte: the length comes from the
// first byte without its top bit, and the 7-bit groups are packed together
// (PackVarintGroups). Spans' varints are 1-4 bytes of no predictable length,
// and the byte loop's mispredicted branches were most of the decoding time.
template <bool kPext>
[[gnu::always_inline]] inline void ReadColumnVarint(const uint8_t*& p, const uint8_t* column_end, const uint8_t* readable,
                                                    uint64_t& v) {
  if (readable - p >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);  // little-endian: the first byte is the lowest
    const uint64_t stops = ~word & 0x8080808080808080ull;
    if (stops != 0) {
      const int bytes = std::countr_zero(stops) / 8 + 1;
      v = PackVarintGroups<kPext>(word & (stops ^ (stops - 1)) & 0x7f7f7f7f7f7f7f7full);  // this varint's bytes
      p += bytes;
      return;
    }
  }
  ReadVarint(p, column_end, v);
}

// A varint of a column of small numbers (string ids, scopes, kinds): one byte
// but in rare traces, so one well predicted branch instead of the word's bit work.
template <bool kPext>
[[gnu::always_inline]] inline void ReadSmallColumnVarint(const uint8_t*& p, const uint8_t* column_end,
                                                         const uint8_t* readable, uint64_t& v) {
  if (*p < 0x80) {
    v = *p++;
    return;
  }
  ReadColumnVarint<kPext>(p, column_end, readable, v);
}

// Steps over a varint of a packed column (as ReadColumnVarint, without its value).
[[gnu::always_inline]] inline void SkipColumnVarint(const uint8_t*& p, const uint8_t* column_end, const uint8_t* readable) {
  if (readable - p >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    if (const uint64_t stops = ~word & 0x8080808080808080ull; stops != 0) {
      p += std::countr_zero(stops) / 8 + 1;
      return;
    }
  }
  uint64_t v;
  ReadVarint(p, column_end, v);
}

// A packed repeated field of varints: [begin, end).
struct Packed {
  const uint8_t* begin = nullptr;
  const uint8_t* end = nullptr;
  bool seen = false;
  // Number of varints; -1 when the last one is unterminated.
  int64_t Count() const {
    // A varint ends at each byte without its top bit: count those, 8 bytes a
    // step (the multiply sums the word's 0/1 bytes into its top byte; no
    // popcount, which without -mpopcnt is a library call).
    int64_t n = 0;
    const uint8_t* p = begin;
    for (; end - p >= 8; p += 8) {
      uint64_t word;
      std::memcpy(&word, p, 8);
      n += static_cast<int64_t>((((~word >> 7) & 0x0101010101010101ull) * 0x0101010101010101ull) >> 56);
    }
    for (; p < end; ++p) n += (*p < 0x80);
    if (begin < end && end[-1] >= 0x80) return -1;
    return n;
  }
};

}  // namespace

void ReserveRows(SpanTable& table, size_t rows) {
  table.start_ns.reserve(rows);
  table.duration_ns.reserve(rows);
  table.cpu_ns.reserve(rows);
  table.delay_ns.reserve(rows);
  table.arg.reserve(rows);
  table.name.reserve(rows);
  table.thread.reserve(rows);
  table.scope.reserve(rows);
  table.kind.reserve(rows);
  table.has_cpu.reserve(rows);
}

TraceDecoder::TraceDecoder(Trace& trace, SpanSink& sink, const ChunkReader& reader)
    : t_(trace), sink_(sink), r_(reader) {
  if (t_.strings.empty()) t_.strings.push_back("");
  sink_.Strings(t_, 0);
}

Status TraceDecoder::Chunk(std::string_view bytes) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  const auto* end = p + bytes.size();
  // Fast path: a chunk that is exactly one SpanBatch (field 5, length-delimited).
  if (p < end && *p == 0x2A && seen_header_) {
    const uint8_t* q = p + 1;
    uint64_t len = 0;
    if (ReadVarint(q, end, len) && len == static_cast<uint64_t>(end - q)) return SpanBatch(q, end);
  }
  if (!chunk_.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return Corrupt("a chunk does not parse");
  if (!seen_header_ && !chunk_.has_header()) return NoHeader();
  switch (chunk_.body_case()) {
    case pb::Chunk::kHeader: return Header(chunk_.header());
    case pb::Chunk::kStrings: return StringsChunk(chunk_.strings());
    case pb::Chunk::kProcess: return Process(chunk_.process());
    case pb::Chunk::kThread: return Thread(chunk_.thread());
    case pb::Chunk::kSpans: {  // a batch not encoded alone in its chunk: back to its own encoding
      std::string b = chunk_.spans().SerializeAsString();
      const auto* s = reinterpret_cast<const uint8_t*>(b.data());
      return SpanBatch(s, s + b.size());
    }
    case pb::Chunk::kConfig: return Config(chunk_.config());
    case pb::Chunk::kProcessSamples: return ProcessSamples(chunk_.process_samples());
    case pb::Chunk::kSystemSamples: return SystemSamples(chunk_.system_samples());
    case pb::Chunk::kDrops: return Drops(chunk_.drops());
    case pb::Chunk::kFooter: return Footer(chunk_.footer());
    case pb::Chunk::BODY_NOT_SET: return Status::Ok();  // a chunk type from a newer minor version
  }
  return Status::Ok();
}

Error TraceDecoder::NoHeader() const {
  return InputError(fmt::format("trace '{}' has no header chunk, the run stopped before it started recording "
                                "(or this is not a complete trace), re-record the run",
                                t_.path));
}

Error TraceDecoder::Corrupt(const std::string& why) const {
  return CorruptTraceError(t_.path, r_.chunk_offset(), why);
}

Status TraceDecoder::Header(const pb::TraceHeader& h) {
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
  o.memory_limit_bytes = h.memory_limit_bytes();
  o.cpu_quota_cores = h.cpu_quota_cores();
  o.start_monotonic_ns = h.start_monotonic_ns();
  o.start_realtime_ns = h.start_realtime_ns();
  o.page_cache_bytes = h.page_cache_bytes();
  o.ring_bytes = h.ring_bytes();
  o.ring_lanes = h.ring_lanes();
  o.sample_period_ms = h.sample_period_ms();
  o.clock_resolution_ns = h.clock_resolution_ns();
  o.run_id = h.run_id();
  o.page_cache_copy_ns_per_byte = h.page_cache_copy_ns_per_byte();
  o.clock_source = h.clock_source() == "tsc" ? ClockSource::kTsc : ClockSource::kMonotonic;
  o.tsc_hz = h.tsc_hz();
  o.page_bytes = h.page_bytes();
  o.page_reclaim = h.page_reclaim();
  return Status::Ok();
}

Status TraceDecoder::StringsChunk(const pb::Strings& s) {
  if (s.first_id() != t_.strings.size())
    return Corrupt(fmt::format("strings start at id {} where {} was expected", s.first_id(), t_.strings.size()));
  const auto first = static_cast<uint32_t>(t_.strings.size());
  for (const auto& v : s.value()) {
    if (v == names::kFetch) fetch_name_ = static_cast<uint32_t>(t_.strings.size());
    if (v == names::kWait || v == names::kEpoch || v == names::kKeptEpoch || v == names::kEpochEnd ||
        v == names::kLoopEnd)
      boundary_names_.push_back(static_cast<uint32_t>(t_.strings.size()));
    t_.strings.push_back(v);
  }
  sink_.Strings(t_, first);
  return Status::Ok();
}

Status TraceDecoder::Process(const pb::ProcessInfo& p) {
  // A process is described again once it reaches the ring (after exec, when its
  // RANK and command line are final): the last description wins, the first
  // sighting time stays.
  ProcessInfo o;
  o.pid = p.pid();
  o.ppid = p.ppid();
  o.rank = p.rank();
  o.local_rank = p.local_rank();
  o.world_size = p.world_size();
  o.comm = p.comm();
  o.cmdline.assign(p.cmdline().begin(), p.cmdline().end());
  o.first_seen_ns = p.first_seen_ns();
  for (auto& known : t_.processes)
    if (known.pid == o.pid) {
      o.first_seen_ns = std::min(o.first_seen_ns, known.first_seen_ns);
      known = std::move(o);
      return Status::Ok();
    }
  t_.processes.push_back(std::move(o));
  return Status::Ok();
}

Status TraceDecoder::Thread(const pb::ThreadInfo& th) {
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

Status TraceDecoder::Config(const pb::Config& c) {
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

Status TraceDecoder::ProcessSamples(const pb::ProcessSamples& s) {
  const int n = s.t_ns_size();
  if (s.cpu_ns_size() != n || s.read_bytes_size() != n || s.rchar_size() != n || s.rss_bytes_size() != n ||
      s.delay_ns_size() != n || s.threads_size() != n || (s.minor_faults_size() != 0 && s.minor_faults_size() != n) ||
      (s.system_cpu_ns_size() != 0 && s.system_cpu_ns_size() != n) ||
      (s.main_thread_cpu_ns_size() != 0 && s.main_thread_cpu_ns_size() != n) ||
      (s.main_thread_delay_ns_size() != 0 && s.main_thread_delay_ns_size() != n))
    return Corrupt("process sample columns differ in length");
  ProcessSeries* series = nullptr;
  for (auto& ps : t_.process_series)
    if (ps.pid == s.pid()) series = &ps;
  const bool first_chunk = !series;
  if (!series) {
    t_.process_series.emplace_back();
    series = &t_.process_series.back();
    series->pid = s.pid();
  }
  // Columns newer traces added are kept only while every chunk has them, so
  // they stay aligned with t_ns.
  const auto optional_column = [&](std::vector<uint64_t>& column, const auto& chunk_column) {
    if (chunk_column.size() == n && (first_chunk || column.size() == series->t_ns.size()))
      column.insert(column.end(), chunk_column.begin(), chunk_column.end());
    else
      column.clear();
  };
  optional_column(series->minor_faults, s.minor_faults());
  optional_column(series->system_cpu_ns, s.system_cpu_ns());
  optional_column(series->main_thread_cpu_ns, s.main_thread_cpu_ns());
  optional_column(series->main_thread_delay_ns, s.main_thread_delay_ns());
  series->t_ns.insert(series->t_ns.end(), s.t_ns().begin(), s.t_ns().end());
  series->cpu_ns.insert(series->cpu_ns.end(), s.cpu_ns().begin(), s.cpu_ns().end());
  series->read_bytes.insert(series->read_bytes.end(), s.read_bytes().begin(), s.read_bytes().end());
  series->rchar.insert(series->rchar.end(), s.rchar().begin(), s.rchar().end());
  series->rss_bytes.insert(series->rss_bytes.end(), s.rss_bytes().begin(), s.rss_bytes().end());
  series->delay_ns.insert(series->delay_ns.end(), s.delay_ns().begin(), s.delay_ns().end());
  series->threads.insert(series->threads.end(), s.threads().begin(), s.threads().end());
  return Status::Ok();
}

Status TraceDecoder::SystemSamples(const pb::SystemSamples& s) {
  const int n = s.t_ns_size();
  if (s.cpu_busy_ns_size() != n || s.cpu_total_ns_size() != n || s.page_cache_bytes_size() != n ||
      s.disk_read_bytes_size() != n || s.mem_available_bytes_size() != n ||
      (s.cpu_steal_ns_size() != 0 && s.cpu_steal_ns_size() != n))
    return Corrupt("system sample columns differ in length");
  auto& o = t_.system;
  // Kept only while every chunk has it, so that it stays aligned with t_ns.
  if (s.cpu_steal_ns_size() == n && o.cpu_steal_ns.size() == o.t_ns.size())
    o.cpu_steal_ns.insert(o.cpu_steal_ns.end(), s.cpu_steal_ns().begin(), s.cpu_steal_ns().end());
  else
    o.cpu_steal_ns.clear();
  o.t_ns.insert(o.t_ns.end(), s.t_ns().begin(), s.t_ns().end());
  o.cpu_busy_ns.insert(o.cpu_busy_ns.end(), s.cpu_busy_ns().begin(), s.cpu_busy_ns().end());
  o.cpu_total_ns.insert(o.cpu_total_ns.end(), s.cpu_total_ns().begin(), s.cpu_total_ns().end());
  o.page_cache_bytes.insert(o.page_cache_bytes.end(), s.page_cache_bytes().begin(), s.page_cache_bytes().end());
  o.disk_read_bytes.insert(o.disk_read_bytes.end(), s.disk_read_bytes().begin(), s.disk_read_bytes().end());
  o.mem_available_bytes.insert(o.mem_available_bytes.end(), s.mem_available_bytes().begin(),
                               s.mem_available_bytes().end());
  return Status::Ok();
}

Status TraceDecoder::Drops(const pb::LaneDrops& d) {
  if (d.thread_id() >= t_.threads.size()) return Corrupt(fmt::format("drops name undefined thread {}", d.thread_id()));
  auto& th = t_.threads[d.thread_id()];
  th.dropped = std::max(th.dropped, d.dropped());  // cumulative per thread
  return Status::Ok();
}

Status TraceDecoder::Footer(const pb::TraceFooter& f) {
  TraceFooter o;
  o.exit_code = f.exit_code();
  o.term_signal = f.term_signal();
  o.end_monotonic_ns = f.end_monotonic_ns();
  o.job_end_monotonic_ns = f.job_end_monotonic_ns();
  o.spans = f.spans();
  o.dropped = f.dropped();
  o.invalid_records = f.invalid_records();
  o.write_failed_ns = f.write_failed_ns();
  o.events_lost = f.events_lost();
  o.tsc_drift_ns = f.tsc_drift_ns();
  o.tsc_drift_over_ns = f.tsc_drift_over_ns();
  o.tsc_max_error_ns = f.tsc_max_error_ns();
  t_.footer = o;
  return Status::Ok();
}

Status TraceDecoder::SpanBatch(const uint8_t* p, const uint8_t* end) {
  static const bool pext_is_fast = decoder_internal::PextIsFast();
  return pext_is_fast ? SpanBatchOf<true>(p, end) : SpanBatchOf<false>(p, end);
}

// Decodes a SpanBatch encoding row by row into a block on the stack, handing the sink a
// block at a time, or adding a span to the sink's folds as its name says
// (SpanSink::actions; docs/trace-format.md has the column rules). Tried on
// 2026-12-06 and dropped: decoding 256 rows a column at a time into arrays
// first (fewer pointers spilled to the stack) ran no faster (analyze's
// task-clock 372.7 against 379.8 ms, +-4%, on 10 M spans): the loop is bound
// by its instructions a span (~34 cycles), not by the spills.
template <bool kPext>
Status TraceDecoder::SpanBatchOf(const uint8_t* p, const uint8_t* end) {
  uint64_t thread_id = 0, base_ns = 0;
  Packed col[12];
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
        if (!ReadVarint(p, end, len) || len > static_cast<uint64_t>(end - p))
          return Corrupt("a span batch field overruns the chunk");
        if (field >= 3 && field <= 11) {
          if (col[field].seen) return Corrupt("a span batch column appears twice");
          col[field] = {p, p + len, true};
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
  auto counts_ok = [n](int64_t c, bool may_omit) { return c == n || c == 1 || (may_omit && c == 0); };
  const int64_t n_name = col[kName].Count(), n_scope = col[kScope].Count(), n_kind = col[kKind].Count();
  const int64_t n_bits = col[kCpuBits].Count(), n_cpu = col[kCpu].Count(), n_delay = col[kDelay].Count();
  if (col[kStart].Count() != n || col[kArg].Count() != n || !counts_ok(n_name, false) || !counts_ok(n_scope, true) ||
      !counts_ok(n_kind, true) || n_cpu < 0 || n_delay != n_cpu || (n_bits != 0 && n_bits != (n + 63) / 64))
    return Corrupt("span batch columns differ in length");
  // The has_cpu bits are checked against the cpu columns before any span goes
  // out, so the row loop below reads cpu/delay without a check.
  if (n_bits == 0) {
    if (n_cpu != 0) return Corrupt("span cpu times without has_cpu bits");
  } else {
    const uint8_t* qb = col[kCpuBits].begin;
    int64_t measured = 0;
    for (int64_t w = 0; w * 64 < n; ++w) {
      uint64_t bits = 0;
      ReadVarint(qb, col[kCpuBits].end, bits);  // counts verified above
      const int64_t in_word = std::min<int64_t>(64, n - w * 64);
      if (in_word < 64 && (bits >> in_word) != 0) return Corrupt("has_cpu bits set beyond the last span");
      measured += std::popcount(bits);
      if (measured > n_cpu) return Corrupt("more has_cpu bits than cpu times");
    }
    if (measured != n_cpu) return Corrupt("fewer has_cpu bits than cpu times");
  }

  const uint32_t thread = static_cast<uint32_t>(thread_id);
  const uint32_t strings = static_cast<uint32_t>(t_.strings.size());
  const uint8_t *q_start = col[kStart].begin, *q_dur = col[kDuration].begin, *q_name = col[kName].begin;
  const uint8_t *q_arg = col[kArg].begin, *q_scope = col[kScope].begin, *q_kind = col[kKind].begin;
  const uint8_t *q_bits = col[kCpuBits].begin, *q_cpu = col[kCpu].begin, *q_delay = col[kDelay].begin;
  uint64_t name = 0, scope = 0, kind = 1, bits = 0;
  uint64_t prev_end = base_ns;
  const SpanAction* actions = sink_.actions.data();
  const uint64_t known_actions = sink_.actions.size();
  // The run of folded spans of one (name, scope) being summed, in registers:
  // added to sink_.folds[fold] when the name or scope changes and at the end.
  uint64_t fold_name = UINT64_MAX, fold_scope = 0;
  uint32_t fold = 0;
  // The fold before it: a worker's samples and its batch's collate alternate.
  uint64_t other_name = UINT64_MAX, other_scope = 0;
  uint32_t other_fold = 0;
  SpanTotals run;
  auto add_run = [&] {
    if (fold_name == UINT64_MAX) return;
    SpanTotals& total = sink_.folds[fold];
    total.count += run.count;
    total.count_with_cpu += run.count_with_cpu;
    total.wall_ns += run.wall_ns;
    total.wall_with_cpu_ns += run.wall_with_cpu_ns;
    total.cpu_ns += run.cpu_ns;
    KeepEarliest(total, run.first_start, run.first_duration_ns, run.first_cpu_ns, run.first_has_cpu);
    total.last_end = std::max(total.last_end, run.last_end);
    run = SpanTotals{};
  };
  DecodedSpan block[SpanSink::kSpanBlock];  // on the stack: nothing else can alias it
  size_t k = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint64_t z = 0, duration = 0;
    ReadColumnVarint<kPext>(q_start, col[kStart].end, end, z);  // counts were verified above
    ReadColumnVarint<kPext>(q_dur, col[kDuration].end, end, duration);
    const uint64_t start = prev_end + ((z >> 1) ^ (~(z & 1) + 1));  // zigzag
    prev_end = start + duration;
    if (i < n_name) {
      ReadSmallColumnVarint<kPext>(q_name, col[kName].end, end, name);
      if (name >= strings) return Corrupt(fmt::format("a span names undefined string {}", name));
    }
    if (i < n_scope) {
      ReadSmallColumnVarint<kPext>(q_scope, col[kScope].end, end, scope);
      if (scope > UINT16_MAX) return Corrupt(fmt::format("a span scope {} is out of range", scope));
    }
    if (i < n_kind) {
      ReadSmallColumnVarint<kPext>(q_kind, col[kKind].end, end, kind);
      if (kind != 1 && kind != 4 && kind != 5) return Corrupt(fmt::format("a span has unknown kind {}", kind));
    }
    if (n_bits && i % 64 == 0) ReadVarint(q_bits, col[kCpuBits].end, bits);
    const bool has_cpu = n_bits && (bits >> (i % 64) & 1);
    const SpanAction action = name < known_actions ? actions[name] : SpanAction::kHand;
    if (action != SpanAction::kHand) {
      // Neither arg nor delay is summed: stepped over, not decoded.
      SkipColumnVarint(q_arg, col[kArg].end, end);
      uint64_t cpu = 0;
      if (has_cpu) {
        ReadColumnVarint<kPext>(q_cpu, col[kCpu].end, end, cpu);
        SkipColumnVarint(q_delay, col[kDelay].end, end);
      }
      if (action == SpanAction::kStage && kind == static_cast<uint64_t>(SpanKind::kSpan)) {
        placing_ = true;
        placer_.Stage(thread, {start, duration, cpu, static_cast<uint32_t>(name), static_cast<uint16_t>(scope), has_cpu},
                      [this](uint32_t th, const PendingStage& p, StagePlace place, uint16_t sc) { FoldStage(th, p, place, sc); });
        continue;
      }
      if (action != SpanAction::kFold || kind != static_cast<uint64_t>(SpanKind::kSpan)) continue;
      if (name != fold_name || scope != fold_scope) {
        add_run();
        std::swap(fold_name, other_name);
        std::swap(fold_scope, other_scope);
        std::swap(fold, other_fold);
        if (name != fold_name || scope != fold_scope) {
          fold = FoldOf(thread, static_cast<uint32_t>(name), static_cast<uint16_t>(scope));
          fold_name = name;
          fold_scope = scope;
        }
      }
      run.count++;
      run.wall_ns += duration;
      if (has_cpu) {
        run.count_with_cpu++;
        run.wall_with_cpu_ns += duration;
        run.cpu_ns += cpu;
      }
      KeepEarliest(run, start, duration, cpu, has_cpu);
      run.last_end = std::max(run.last_end, prev_end);
      continue;
    }
    DecodedSpan& s = block[k];
    s.start_ns = start;
    s.duration_ns = duration;
    ReadColumnVarint<kPext>(q_arg, col[kArg].end, end, s.arg);
    s.has_cpu = has_cpu;
    s.cpu_ns = s.delay_ns = 0;
    if (has_cpu) {
      ReadColumnVarint<kPext>(q_cpu, col[kCpu].end, end, s.cpu_ns);
      ReadColumnVarint<kPext>(q_delay, col[kDelay].end, end, s.delay_ns);
    }
    s.thread = thread;
    s.name = static_cast<uint32_t>(name);
    s.scope = static_cast<uint16_t>(scope);
    s.kind = static_cast<SpanKind>(kind);
    if (placing_) {  // an epoch or epoch_end may be an instant (older hooks): still a next() call
      auto fold = [this](uint32_t th, const PendingStage& p, StagePlace place, uint16_t sc) { FoldStage(th, p, place, sc); };
      if (name == fetch_name_ && kind == static_cast<uint64_t>(SpanKind::kSpan)) placer_.Fetch(thread, start, s.scope, fold);
      else if (std::find(boundary_names_.begin(), boundary_names_.end(), name) != boundary_names_.end())
        placer_.Wait(thread, s.scope, fold);
    }
    if (++k == SpanSink::kSpanBlock) {
      if (auto st = sink_.Spans(t_, std::span<const DecodedSpan>(block, k)); !st.ok()) return st;
      k = 0;
    }
  }
  add_run();
  if (k) return sink_.Spans(t_, std::span<const DecodedSpan>(block, k));
  return Status::Ok();
}

uint32_t TraceDecoder::FoldOf(uint32_t thread, uint32_t name, uint16_t scope, StagePlace place) {
  const uint32_t scope_and_place = uint32_t{static_cast<uint8_t>(place)} << 16 | scope;
  auto [it, inserted] = fold_of_key_.try_emplace(FoldKey{(uint64_t{thread} << 32) | name, scope_and_place},
                                                 static_cast<uint32_t>(sink_.folds.size()));
  if (inserted) {
    SpanTotals& total = sink_.folds.emplace_back();
    total.thread = thread;
    total.name = name;
    total.scope = scope;
    total.place = place;
  }
  return it->second;
}

void TraceDecoder::FoldStage(uint32_t thread, const PendingStage& span, StagePlace place, uint16_t scope) {
  AddToTotals(sink_.folds[FoldOf(thread, span.name, scope, place)], span);
}

void TraceDecoder::Finish() {
  placer_.Finish([this](uint32_t th, const PendingStage& p, StagePlace place, uint16_t sc) { FoldStage(th, p, place, sc); });
}

Status DecodeChunks(ChunkReader& reader, Trace& trace, SpanSink& sink) {
  trace.path = reader.path();
  trace.bytes = reader.file_size();
  TraceDecoder decoder(trace, sink, reader);
  std::string_view bytes;
  for (;;) {
    auto more = reader.NextRaw(bytes);
    if (!more.ok()) return more.error();
    if (!*more) break;
    if (auto st = decoder.Chunk(bytes); !st.ok()) return st;
  }
  if (!decoder.seen_header()) return decoder.NoHeader();
  decoder.Finish();
  TakeOutReapedChildren(trace);
  trace.truncated = reader.truncated();
  return Status::Ok();
}

Status DecodeTraceFile(const std::string& path, Trace& trace, SpanSink& sink) {
  auto reader = ChunkReader::Open(path);
  if (!reader.ok()) return reader.error();
  return DecodeChunks(**reader, trace, sink);
}

}  // namespace stallprof
