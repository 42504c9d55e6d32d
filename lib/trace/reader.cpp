#include "reader.h"

#include <fmt/core.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <zlib.h>

#include <bit>
#include <cerrno>
#include <cstring>

namespace stallprof {
namespace {

// Longer chunks than this are not written by any stallprof (a batch is at most
// ~64K spans, about 1 MiB): a bigger length field means the file is corrupt.
constexpr uint32_t kMaxChunkBytes = 256u << 20;

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

// A packed repeated field of varints: [begin, end).
struct Packed {
  const uint8_t* begin = nullptr;
  const uint8_t* end = nullptr;
  bool seen = false;
  // Number of varints; -1 when the last one is unterminated.
  int64_t Count() const {
    int64_t n = 0;
    for (const uint8_t* p = begin; p < end; ++p) n += (*p < 0x80);
    if (begin < end && end[-1] >= 0x80) return -1;
    return n;
  }
};

// Reserves `n` elements and asks for transparent huge pages over the reserved
// range: filling a 10 M-span table otherwise spends half its time in 4 KiB page
// faults. Untouched reserved pages cost address space only.
template <typename T>
void ReserveHuge(std::vector<T>& v, size_t n) {
  v.reserve(n);
  constexpr uintptr_t kHuge = 2u << 20;
  const auto begin = (reinterpret_cast<uintptr_t>(v.data()) + kHuge - 1) & ~(kHuge - 1);
  const auto end = (reinterpret_cast<uintptr_t>(v.data() + n)) & ~(kHuge - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

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

Result<std::unique_ptr<ChunkReader>> ChunkReader::Open(const std::string& path) {
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
  r->file_ = std::fopen(path.c_str(), "rb");
  if (!r->file_)
    return InputError(fmt::format("cannot read trace '{}', {}, check its permissions", path, std::strerror(errno)));
  std::setvbuf(r->file_, nullptr, _IOFBF, 1 << 20);
  r->file_size_ = static_cast<uint64_t>(st.st_size);
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
  uint32_t actual = static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(buffer_.data()), length));
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

// Builds the Trace chunk by chunk, validating every id against what came before.
class Loader {
 public:
  Loader(Trace& trace, const ChunkReader& reader) : t_(trace), r_(reader) {}

  Status Chunk(std::string_view bytes) {
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
      case pb::Chunk::kStrings: return Strings(chunk_.strings());
      case pb::Chunk::kProcess: return Process(chunk_.process());
      case pb::Chunk::kThread: return Thread(chunk_.thread());
      case pb::Chunk::kSpans: {
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

  bool seen_header() const { return seen_header_; }

  Error NoHeader() const {
    return InputError(fmt::format("trace '{}' has no header chunk, the run stopped before it started recording "
                                  "(or this is not a complete trace), re-record the run",
                                  t_.path));
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
    for (const auto& v : s.value()) t_.strings.push_back(v);
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
    o.mem_available_bytes.insert(o.mem_available_bytes.end(), s.mem_available_bytes().begin(),
                                 s.mem_available_bytes().end());
    return Status::Ok();
  }

  Status Drops(const pb::LaneDrops& d) {
    if (d.thread_id() >= t_.threads.size()) return Corrupt(fmt::format("drops name undefined thread {}", d.thread_id()));
    auto& th = t_.threads[d.thread_id()];
    th.dropped = std::max(th.dropped, d.dropped());  // cumulative per thread
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

  // Decodes a SpanBatch encoding straight into the SpanTable columns
  // (docs/trace-format.md has the column rules).
  Status SpanBatch(const uint8_t* p, const uint8_t* end) {
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
    auto counts_ok = [n](int64_t c, bool may_collapse, bool may_omit) {
      return c == n || (may_collapse && c == 1) || (may_omit && c == 0);
    };
    const int64_t n_name = col[kName].Count(), n_scope = col[kScope].Count(), n_kind = col[kKind].Count();
    const int64_t n_bits = col[kCpuBits].Count(), n_cpu = col[kCpu].Count(), n_delay = col[kDelay].Count();
    if (col[kStart].Count() != n || col[kArg].Count() != n || !counts_ok(n_name, true, false) ||
        !counts_ok(n_scope, true, true) || !counts_ok(n_kind, true, true) || n_cpu < 0 || n_delay != n_cpu ||
        (n_bits != 0 && n_bits != (n + 63) / 64))
      return Corrupt("span batch columns differ in length");

    auto& s = t_.spans;
    const size_t old = s.size();
    const size_t total = old + static_cast<size_t>(n);
    s.start_ns.resize(total);
    s.duration_ns.resize(total);
    s.arg.resize(total);
    s.name.resize(total);
    s.thread.resize(total);
    s.scope.resize(total);
    s.kind.resize(total);
    s.has_cpu.resize(total);
    s.cpu_ns.resize(total);
    s.delay_ns.resize(total);

    auto decode_u64 = [](const Packed& c, uint64_t* out, int64_t count) {
      const uint8_t* q = c.begin;
      for (int64_t i = 0; i < count; ++i) ReadVarint(q, c.end, out[i]);  // counts verified above
    };
    uint64_t* dur = s.duration_ns.data() + old;
    decode_u64(col[kDuration], dur, n);
    decode_u64(col[kArg], s.arg.data() + old, n);
    {
      const uint8_t* q = col[kStart].begin;
      uint64_t* start = s.start_ns.data() + old;
      uint64_t prev_end = base_ns;
      for (int64_t i = 0; i < n; ++i) {
        uint64_t z = 0;
        ReadVarint(q, col[kStart].end, z);
        const uint64_t delta = (z >> 1) ^ (~(z & 1) + 1);  // zigzag
        start[i] = prev_end + delta;
        prev_end = start[i] + dur[i];
      }
    }
    {
      const uint8_t* q = col[kName].begin;
      const uint32_t strings = static_cast<uint32_t>(t_.strings.size());
      uint32_t* name = s.name.data() + old;
      uint64_t v = 0;
      for (int64_t i = 0; i < n; ++i) {
        if (i < n_name) {
          ReadVarint(q, col[kName].end, v);
          if (v >= strings) return Corrupt(fmt::format("a span names undefined string {}", v));
        }
        name[i] = static_cast<uint32_t>(v);
      }
    }
    {
      const uint8_t* q = col[kScope].begin;
      uint16_t* scope = s.scope.data() + old;
      uint64_t v = 0;
      for (int64_t i = 0; i < n; ++i) {
        if (i < n_scope) {
          ReadVarint(q, col[kScope].end, v);
          if (v > UINT16_MAX) return Corrupt(fmt::format("a span scope {} is out of range", v));
        }
        scope[i] = static_cast<uint16_t>(v);
      }
    }
    {
      const uint8_t* q = col[kKind].begin;
      SpanKind* kind = s.kind.data() + old;
      uint64_t v = 1;
      for (int64_t i = 0; i < n; ++i) {
        if (i < n_kind) {
          ReadVarint(q, col[kKind].end, v);
          if (v != 1 && v != 4 && v != 5) return Corrupt(fmt::format("a span has unknown kind {}", v));
        }
        kind[i] = static_cast<SpanKind>(v);
      }
    }
    std::fill(s.thread.begin() + old, s.thread.end(), static_cast<uint32_t>(thread_id));
    uint8_t* has_cpu = s.has_cpu.data() + old;
    if (n_bits == 0) {
      if (n_cpu != 0) return Corrupt("span cpu times without has_cpu bits");
      std::fill(has_cpu, has_cpu + n, 0);
      std::fill(s.cpu_ns.begin() + old, s.cpu_ns.end(), 0);
      std::fill(s.delay_ns.begin() + old, s.delay_ns.end(), 0);
      return Status::Ok();
    }
    const uint8_t* qb = col[kCpuBits].begin;
    const uint8_t* qc = col[kCpu].begin;
    const uint8_t* qd = col[kDelay].begin;
    uint64_t* cpu = s.cpu_ns.data() + old;
    uint64_t* delay = s.delay_ns.data() + old;
    int64_t measured = 0;
    for (int64_t w = 0; w * 64 < n; ++w) {
      uint64_t bits = 0;
      ReadVarint(qb, col[kCpuBits].end, bits);
      const int64_t in_word = std::min<int64_t>(64, n - w * 64);
      if (in_word < 64 && (bits >> in_word) != 0) return Corrupt("has_cpu bits set beyond the last span");
      measured += std::popcount(bits);
      if (measured > n_cpu) return Corrupt("more has_cpu bits than cpu times");
      for (int64_t b = 0; b < in_word; ++b) {
        const int64_t i = w * 64 + b;
        const bool on = (bits >> b) & 1;
        has_cpu[i] = on;
        cpu[i] = delay[i] = 0;
        if (on) {
          ReadVarint(qc, col[kCpu].end, cpu[i]);
          ReadVarint(qd, col[kDelay].end, delay[i]);
        }
      }
    }
    if (measured != n_cpu) return Corrupt("fewer has_cpu bits than cpu times");
    return Status::Ok();
  }

  Trace& t_;
  const ChunkReader& r_;
  pb::Chunk chunk_;
  bool seen_header_ = false;
};

}  // namespace

Result<Trace> LoadTrace(const std::string& path) {
  auto reader = ChunkReader::Open(path);
  if (!reader.ok()) return reader.error();
  Trace trace;
  trace.path = path;
  trace.bytes = (*reader)->file_size();
  trace.strings.push_back("");
  // Reserve for the densest possible encoding (about 4 bytes per span): pages
  // never written are never touched, so this costs address space, not memory,
  // and the columns never reallocate (which would double the peak).
  const size_t guess = trace.bytes / 4 + 16;
  auto& s = trace.spans;
  ReserveHuge(s.start_ns, guess);
  ReserveHuge(s.duration_ns, guess);
  ReserveHuge(s.cpu_ns, guess);
  ReserveHuge(s.delay_ns, guess);
  ReserveHuge(s.arg, guess);
  ReserveHuge(s.name, guess);
  ReserveHuge(s.thread, guess);
  ReserveHuge(s.scope, guess);
  ReserveHuge(s.kind, guess);
  ReserveHuge(s.has_cpu, guess);

  Loader loader(trace, **reader);
  std::string_view bytes;
  for (;;) {
    auto more = (*reader)->NextRaw(bytes);
    if (!more.ok()) return more.error();
    if (!*more) break;
    if (auto st = loader.Chunk(bytes); !st.ok()) return st.error();
  }
  if (!loader.seen_header()) return loader.NoHeader();
  trace.truncated = (*reader)->truncated();
  return trace;
}

}  // namespace stallprof
