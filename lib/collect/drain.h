// The drain side of a run: turns what the ring holds into trace chunks.
// Maps each lane generation to a trace thread, per-lane name ids to trace
// string ids, and batches spans per thread (flushed every ~100 ms or ~64K spans).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "ring/consumer.h"
#include "sink.h"
#include "trace/writer.h"

namespace stallprof::collect {

// Live figures for the status line, safe to read from another thread.
struct LiveCounters {
  std::atomic<uint64_t> records{0};
  std::atomic<uint64_t> iterations{0};  // dataloader.wait spans
  std::atomic<uint64_t> dropped{0};
  // Stall % of the main process over the last few seconds (-1 = no data yet).
  double RecentStallPercent(uint64_t now_ns) const;
  void AddWait(pid_t pid, uint64_t end_ns, uint64_t wait_ns);
  std::atomic<pid_t> main_pid{0};

 private:
  mutable std::mutex mu_;
  std::deque<std::pair<uint64_t, uint64_t>> waits_;  // (end, duration) of recent main-process waits
};

class Drainer : public ring::Visitor {
 public:
  // Spans per thread batch before it is written regardless of time.
  static constexpr size_t kMaxBatchSpans = 64 * 1024;

  Drainer(TraceSink& sink, LiveCounters& live) : sink_(sink), live_(live) {}
  void OnLaneOwner(const ring::LaneOwner& owner) override;
  void OnName(const ring::LaneOwner& owner, uint32_t id, std::string_view text) override;
  void OnRecord(const ring::LaneOwner& owner, const sp_record& record) override;
  void OnRecords(const ring::LaneOwner& owner, const sp_record* records, size_t count) override;
  void OnLaneReleased(const ring::LaneOwner& owner, uint64_t dropped) override;

  // Writes every non-empty batch.
  void FlushAll();
  uint64_t spans() const { return spans_; }
  // Producer threads (lane generations) seen so far.
  uint32_t producers() const { return next_thread_id_; }

 private:
  struct ThreadState {
    uint32_t thread_id = 0;
    pid_t pid = 0;
    std::vector<uint32_t> names;  // per-lane name id -> trace string id (UINT32_MAX = unknown)
    std::vector<std::string> texts;  // per-lane name id -> text (config string values)
    SpanBatchBuilder batch{0};
  };
  ThreadState& StateOf(const ring::LaneOwner& owner);
  void Flush(ThreadState& t);
  void Record(ThreadState& t, const sp_record& record);
  uint32_t NameOf(ThreadState& t, uint64_t lane_name) const;

  TraceSink& sink_;
  LiveCounters& live_;
  // (lane, generation) -> state of that producer thread.
  std::map<std::pair<uint32_t, uint64_t>, ThreadState> threads_;
  uint32_t next_thread_id_ = 0;
  uint64_t spans_ = 0;
  uint32_t wait_name_ = UINT32_MAX;
  std::string encoded_;  // reused buffer for span batch chunks
};

}  // namespace stallprof::collect
