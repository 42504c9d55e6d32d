// The one decoder of trace.pb chunks. Everything except spans is decoded into
// a Trace (header, strings, processes, threads, configs, sampler series, drops,
// footer), validating every id against what came before; spans are decoded
// straight from their SpanBatch encoding (no protobuf object, no allocation
// per span) and handed to a SpanSink, which decides what to keep: LoadTrace
// appends them all to Trace::spans, analysis::LoadForAnalysis keeps a few
// names and folds the rest into stage totals, the Chrome export writes them
// out as JSON and keeps none.
//
// Ordering: a sink sees strings defined (SpanSink::Strings) before any span
// that names them, and every span exactly once, in file order. The decoder
// treats the file as untrusted: an id used before it is defined, columns of
// different lengths or an impossible value is an InputError ("trace '<path>'
// is corrupt, ...") and decoding stops; spans of a batch that fails half way
// may already have been handed to the sink (callers drop everything on error).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "common/result.h"
#include "reader.h"
#include "trace.h"
#include "trace.pb.h"

namespace stallprof {

// One decoded span, instant or counter (one row of SpanTable).
struct DecodedSpan {
  uint64_t start_ns = 0;
  uint64_t duration_ns = 0;
  uint64_t cpu_ns = 0;    // 0 when !has_cpu
  uint64_t delay_ns = 0;  // 0 when !has_cpu
  uint64_t arg = 0;
  uint32_t thread = 0;    // index into Trace::threads, already validated
  uint32_t name = 0;      // index into Trace::strings, already validated
  uint16_t scope = 0;
  SpanKind kind = SpanKind::kSpan;
  bool has_cpu = false;
};

// Appends `span` as one row of `table`.
inline void AppendSpan(SpanTable& table, const DecodedSpan& span) {
  table.start_ns.push_back(span.start_ns);
  table.duration_ns.push_back(span.duration_ns);
  table.cpu_ns.push_back(span.cpu_ns);
  table.delay_ns.push_back(span.delay_ns);
  table.arg.push_back(span.arg);
  table.name.push_back(span.name);
  table.thread.push_back(span.thread);
  table.scope.push_back(span.scope);
  table.kind.push_back(span.kind);
  table.has_cpu.push_back(span.has_cpu);
}

// Reserves room for `rows` rows in every column of `table`: growing by
// doubling copies every column and touches twice the memory. The columns are
// HugeVectors (common/huge_pages.h): pages never written are never touched, so
// a generous reservation costs address space only.
void ReserveRows(SpanTable& table, size_t rows);

// Receives what the decoder does not keep in the Trace itself.
class SpanSink {
 public:
  virtual ~SpanSink() = default;
  // Strings [first_id, trace.strings.size()) were just defined (id 0, "", is
  // announced before the first chunk). Called before any span naming them.
  virtual void Strings(const Trace& trace, uint32_t first_id) {
    (void)trace;
    (void)first_id;
  }
  // The next decoded spans, in file order; `spans` is valid for this call
  // only. Called once per block of up to kSpanBlock spans: one virtual call per
  // block, not per span. An error (e.g. an output that cannot be written)
  // stops the decoding and is returned by DecodeChunks.
  virtual Status Spans(const Trace& trace, std::span<const DecodedSpan> spans) = 0;

  // Spans per Spans() call at most: 256 * 56 bytes stays in L1/L2.
  static constexpr size_t kSpanBlock = 256;
};

// Decodes the chunks of one file into `trace` (which the caller has set up
// with DecodeChunks, or which starts empty: strings gets its "" at id 0).
class TraceDecoder {
 public:
  TraceDecoder(Trace& trace, SpanSink& sink, const ChunkReader& reader);
  // One chunk as returned by ChunkReader::NextRaw. InputError when it is
  // corrupt (see the header comment), or the sink's error.
  Status Chunk(std::string_view bytes);
  bool seen_header() const { return seen_header_; }
  // "trace '<path>' has no header chunk, ...".
  Error NoHeader() const;

 private:
  Error Corrupt(const std::string& why) const;
  Status Header(const pb::TraceHeader& h);
  Status StringsChunk(const pb::Strings& s);
  Status Process(const pb::ProcessInfo& p);
  Status Thread(const pb::ThreadInfo& th);
  Status Config(const pb::Config& c);
  Status ProcessSamples(const pb::ProcessSamples& s);
  Status SystemSamples(const pb::SystemSamples& s);
  Status Drops(const pb::LaneDrops& d);
  Status Footer(const pb::TraceFooter& f);
  Status SpanBatch(const uint8_t* p, const uint8_t* end);

  Trace& t_;
  SpanSink& sink_;
  const ChunkReader& r_;
  pb::Chunk chunk_;
  bool seen_header_ = false;
};

// Reads every chunk of `reader` into `trace` and `sink`: sets trace.path,
// trace.bytes and trace.truncated (a file ending inside a chunk decodes up to
// its last complete chunk). InputError when a chunk is corrupt or the file has
// no header chunk; the sink's error when it fails.
Status DecodeChunks(ChunkReader& reader, Trace& trace, SpanSink& sink);

// Opens `path` and DecodeChunks it. Also the InputErrors of ChunkReader::Open.
Status DecodeTraceFile(const std::string& path, Trace& trace, SpanSink& sink);

}  // namespace stallprof
