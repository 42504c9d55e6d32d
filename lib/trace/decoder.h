// The one decoder of trace.pb chunks. Everything except spans is decoded into
// a Trace (header, strings, processes, threads, configs, sampler series, drops,
// footer), validating every id against what came before; spans are decoded
// straight from their SpanBatch encoding (no protobuf object, no allocation
// per span) and handed to a SpanSink, which decides what to keep: LoadTrace
// appends them all to Trace::spans, analysis::LoadForAnalysis keeps a few
// names and has the decoder fold the rest into totals (SpanSink::actions), the
// Chrome export writes them out as JSON and keeps none.
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
#include <unordered_map>
#include <vector>

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

// What the decoder does with the spans of one name (SpanSink::actions).
enum class SpanAction : uint8_t {
  kHand,  // handed to SpanSink::Spans, one by one
  kFold,   // spans (SpanKind::kSpan) added to SpanSink::folds; instants and counters dropped
  kStage,  // as kFold, a user's stage: folded apart by where it ran (StagePlacer)
  kDrop,   // neither
};

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

  // Per string id, what becomes of the spans of that name (the sink's
  // Strings() extends it); names beyond its end are handed over. A folded span
  // is summed in the decoding loop, without a DecodedSpan or a call: most
  // spans of a run are samples and stages that analysis only totals.
  std::vector<SpanAction> actions;
  // The totals of the folded spans per (thread, name, scope, place), in the
  // order first seen (a stage's once placed: at its thread's next fetch or
  // wait, or when the decoding ends).
  std::vector<SpanTotals> folds;
};

namespace decoder_internal {
// Whether pext is a single fast instruction here: BMI2, but not on AMD before
// Zen 3, where it is microcoded (tens of cycles). The decoder packs varints
// with it where it is.
bool PextIsFast();
// A varint's bytes, top bits cleared, packed into its value: by pext (only
// where the CPU has BMI2) or by shifts and masks. For the tests.
uint64_t PackVarintGroupsWith(bool pext, uint64_t groups);
}  // namespace decoder_internal

// Decodes the chunks of one file into `trace` (which the caller has set up
// with DecodeChunks, or which starts empty: strings gets its "" at id 0).
class TraceDecoder {
 public:
  TraceDecoder(Trace& trace, SpanSink& sink, const ChunkReader& reader);
  // One chunk as returned by ChunkReader::NextRaw. InputError when it is
  // corrupt (see the header comment), or the sink's error.
  Status Chunk(std::string_view bytes);
  // After the last chunk: folds the stages still waiting to be placed.
  void Finish();
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
  // SpanBatch's work, with the varints' bits packed by pext or by shifts (decoder.cpp).
  template <bool kPext>
  Status SpanBatchOf(const uint8_t* p, const uint8_t* end);
  // The index in sink_.folds of (thread, name, scope, place), added when new.
  uint32_t FoldOf(uint32_t thread, uint32_t name, uint16_t scope, StagePlace place = StagePlace::kUnplaced);
  // Adds a placed stage span to its fold.
  void FoldStage(uint32_t thread, const PendingStage& span, StagePlace place, uint16_t scope);

  Trace& t_;
  SpanSink& sink_;
  const ChunkReader& r_;
  pb::Chunk chunk_;
  bool seen_header_ = false;
  // SpanSink::folds by (thread, name, scope, place).
  struct FoldKey {
    uint64_t thread_and_name = 0;  // thread << 32 | name
    uint32_t scope = 0;            // place << 16 | scope
    bool operator==(const FoldKey& o) const { return thread_and_name == o.thread_and_name && scope == o.scope; }
  };
  struct FoldKeyHash {
    size_t operator()(const FoldKey& k) const { return std::hash<uint64_t>()(k.thread_and_name * 65599u + k.scope); }
  };
  std::unordered_map<FoldKey, uint32_t, FoldKeyHash> fold_of_key_;
  // User stages (SpanAction::kStage) wait here for their thread's next fetch
  // span or next() call (a wait, epoch or epoch_end span: no fetch contains
  // one), whose string ids are these once defined.
  StagePlacer placer_;
  bool placing_ = false;  // a stage span was seen
  uint32_t fetch_name_ = UINT32_MAX;
  std::vector<uint32_t> boundary_names_;
};

// Reads every chunk of `reader` into `trace` and `sink`: sets trace.path,
// trace.bytes and trace.truncated (a file ending inside a chunk decodes up to
// its last complete chunk). InputError when a chunk is corrupt or the file has
// no header chunk; the sink's error when it fails.
Status DecodeChunks(ChunkReader& reader, Trace& trace, SpanSink& sink);

// Opens `path` and DecodeChunks it. Also the InputErrors of ChunkReader::Open.
Status DecodeTraceFile(const std::string& path, Trace& trace, SpanSink& sink);

}  // namespace stallprof
