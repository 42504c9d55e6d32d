// LoadForAnalysis: trace.pb streamed into a TraceDigest (see analysis.h).
#include <algorithm>
#include <span>
#include <unordered_map>

#include "analysis.h"
#include "internal.h"
#include "trace/decoder.h"

namespace stallprof::analysis {

namespace {

// Keeps the spans analysis reads one by one; folds all others into stage totals.
class DigestSink final : public SpanSink {
 public:
  explicit DigestSink(TraceDigest& digest) : d_(digest) {}

  void Strings(const Trace& trace, uint32_t first_id) override {
    for (size_t id = first_id; id < trace.strings.size(); ++id) {
      const std::string& v = trace.strings[id];
      const bool keep = v == names::kWait || v == names::kEpoch || v == names::kEpochEnd || v == names::kFetch ||
                        v == names::kWorkerStart || v == names::kReadStorage || v == names::kReadCalls ||
                        v == names::kSystemCpu;
      // The hook timing itself: neither kept nor folded.
      const bool calibration = v.rfind(names::kCalibrationPrefix, 0) == 0;
      action_.push_back(keep ? kKeep : calibration ? kSkip : kFold);
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
    for (const DecodedSpan& d : spans) {
      const uint8_t action = action_[d.name];
      if (action == kFold) {
        if (d.kind == SpanKind::kSpan) Fold(d.thread, d.name, d.scope, d.start_ns, d.duration_ns, d.has_cpu, d.cpu_ns);
      } else if (action == kKeep) {
        AppendSpan(s, d);
      }
    }
    return Status::Ok();
  }

 private:
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
      st.wall_with_cpu_ns += duration;
      st.cpu_ns += cpu;
    }
    st.first_start = std::min(st.first_start, start);
    st.last_end = std::max(st.last_end, start + duration);
  }

  TraceDigest& d_;
  enum : uint8_t { kFold, kKeep, kSkip };
  std::vector<uint8_t> action_;  // per string id
  std::unordered_map<internal::StageKey, uint32_t, internal::StageKeyHash> index_;
  internal::StageKey last_key_{UINT64_MAX, 0};
  uint32_t last_index_ = 0;
  bool reserved_ = false;
};

}  // namespace

Result<TraceDigest> LoadForAnalysis(const std::string& path) {
  TraceDigest digest;
  DigestSink sink(digest);
  if (Status s = DecodeTraceFile(path, digest.trace, sink); !s.ok()) return s.error();
  return digest;
}

}  // namespace stallprof::analysis
