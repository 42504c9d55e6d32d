// LoadForAnalysis: trace.pb streamed into a TraceDigest (see analysis.h).
#include <algorithm>
#include <span>

#include "analysis.h"
#include "trace/decoder.h"

namespace stallprof::analysis {

namespace {

// Keeps the spans analysis reads one by one; has the decoder fold all others
// into stage totals (SpanSink::folds), a user's stages apart by where they ran.
class DigestSink final : public SpanSink {
 public:
  explicit DigestSink(TraceDigest& digest) : d_(digest) {}

  void Strings(const Trace& trace, uint32_t first_id) override {
    for (size_t id = first_id; id < trace.strings.size(); ++id) {
      const std::string& v = trace.strings[id];
      const bool keep = v == names::kWait || v == names::kEpoch || v == names::kKeptEpoch || v == names::kEpochEnd ||
                        v == names::kLoopEnd || v == names::kShutdown ||
                        v == names::kSamplerFirst || v == names::kFetch ||
                        v == names::kWorkerStart || v == names::kReadStorage || v == names::kReadCalls ||
                        v == names::kSystemCpu || v == names::kGilProbe || v == names::kHandout;
      // The hook timing itself: neither kept nor folded.
      const bool calibration = v.rfind(names::kCalibrationPrefix, 0) == 0;
      actions.push_back(keep          ? SpanAction::kHand
                        : calibration ? SpanAction::kDrop
                        : IsUserStageName(v) ? SpanAction::kStage
                                             : SpanAction::kFold);
    }
  }

  Status Spans(const Trace& trace, std::span<const DecodedSpan> spans) override {
    auto& s = d_.trace.spans;
    if (!reserved_) {
      // Every span kept at the densest encoding (about 4 bytes a span), up to
      // 16 M rows (720 MiB of address space, touched only as rows arrive):
      // the columns do not reallocate, and a bigger trace doubles from there.
      ReserveRows(s, std::min<size_t>(trace.bytes / 4 + 16, size_t{1} << 24));
      reserved_ = true;
    }
    for (const DecodedSpan& d : spans) AppendSpan(s, d);
    return Status::Ok();
  }

 private:
  TraceDigest& d_;
  bool reserved_ = false;
};

}  // namespace

Result<TraceDigest> LoadForAnalysis(const std::string& path) {
  TraceDigest digest;
  DigestSink sink(digest);
  if (Status s = DecodeTraceFile(path, digest.trace, sink); !s.ok()) return s.error();
  digest.stages = std::move(sink.folds);
  return digest;
}

}  // namespace stallprof::analysis
