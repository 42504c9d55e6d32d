#include "drain.h"

#include <time.h>

#include <cstring>

#include "common/utf8.h"
#include "procfs.h"
#include "trace/trace.h"

namespace stallprof::collect {
namespace {

uint64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// How far back the live stall % looks.
constexpr uint64_t kStallWindowNs = 5'000'000'000ull;

}  // namespace

void LiveCounters::AddWait(pid_t pid, uint64_t end_ns, uint64_t wait_ns) {
  if (pid != main_pid.load(std::memory_order_relaxed)) return;
  std::lock_guard lock(mu_);
  waits_.emplace_back(end_ns, wait_ns);
  while (!waits_.empty() && waits_.front().first + kStallWindowNs < end_ns) waits_.pop_front();
}

double LiveCounters::RecentStallPercent(uint64_t now_ns) const {
  std::lock_guard lock(mu_);
  if (waits_.empty()) return -1;
  const uint64_t from = now_ns > kStallWindowNs ? now_ns - kStallWindowNs : 0;
  // The window starts at the oldest wait we still hold if that is later.
  const uint64_t oldest_start = waits_.front().first - waits_.front().second;
  const uint64_t begin = std::max(from, oldest_start);
  if (now_ns <= begin) return -1;
  uint64_t sum = 0;
  for (auto& [end, dur] : waits_)
    if (end >= from) sum += dur;
  return std::min(100.0, 100.0 * static_cast<double>(sum) / static_cast<double>(now_ns - begin));
}

Drainer::ThreadState& Drainer::StateOf(const ring::LaneOwner& owner) {
  auto it = threads_.find({owner.lane, owner.generation});
  if (it != threads_.end()) return it->second;
  OnLaneOwner(owner);  // the consumer always announces owners first; stay safe if not
  return threads_.at({owner.lane, owner.generation});
}

void Drainer::OnLaneOwner(const ring::LaneOwner& owner) {
  auto [it, inserted] = threads_.try_emplace({owner.lane, owner.generation});
  if (!inserted) return;
  ThreadState& t = it->second;
  t.thread_id = next_thread_id_++;
  t.pid = static_cast<pid_t>(owner.pid);
  t.batch = SpanBatchBuilder(t.thread_id);
  const uint64_t now = NowNs();
  sink_.NoteProcess(t.pid, now, TraceSink::Seen::kOnRing);
  pb::Chunk c;
  auto* info = c.mutable_thread();
  info->set_thread_id(t.thread_id);
  info->set_pid(owner.pid);
  info->set_tid(owner.tid);
  info->set_lane(owner.lane);
  info->set_lane_generation(owner.generation);
  info->set_name(sink_.Intern(procfs::ReadThreadName(t.pid, static_cast<pid_t>(owner.tid))));
  uint32_t client = static_cast<uint32_t>(ClientKind::kC);
  if (owner.flags & SP_LANE_FLAG_PYTHON_CEXT) client = static_cast<uint32_t>(ClientKind::kPythonCext);
  if (owner.flags & SP_LANE_FLAG_PYTHON_CTYPES) client = static_cast<uint32_t>(ClientKind::kPythonCtypes);
  info->set_client(client);
  sink_.Write(c);
}

void Drainer::OnName(const ring::LaneOwner& owner, uint32_t id, std::string_view text) {
  ThreadState& t = StateOf(owner);
  if (id >= (1u << 20)) return;  // the consumer bounds ids; never grow without limit
  if (t.names.size() <= id) t.names.resize(id + 1, UINT32_MAX);
  const uint32_t global = sink_.Intern(std::string(text));
  t.names[id] = global;
  if (t.texts.size() <= id) t.texts.resize(id + 1);
  t.texts[id] = std::string(text);
  if (text == names::kWait) wait_name_ = global;
}

uint32_t Drainer::NameOf(ThreadState& t, uint64_t lane_name) const {
  if (lane_name < t.names.size() && t.names[lane_name] != UINT32_MAX) return t.names[lane_name];
  return 0;
}

void Drainer::OnRecord(const ring::LaneOwner& owner, const sp_record& r) { Record(StateOf(owner), r); }

void Drainer::OnRecords(const ring::LaneOwner& owner, const sp_record* records, size_t count) {
  ThreadState& t = StateOf(owner);
  for (size_t i = 0; i < count; ++i) Record(t, records[i]);
}

void Drainer::Record(ThreadState& t, const sp_record& r) {
  switch (r.kind) {
    case SP_KIND_SPAN:
    case SP_KIND_INSTANT:
    case SP_KIND_COUNTER: {
      SpanRow row;
      row.start_ns = r.start_ns;
      row.duration_ns = r.kind == SP_KIND_SPAN ? r.duration_ns : 0;
      row.name = NameOf(t, r.name);
      row.arg = r.arg;
      row.scope = r.scope;
      row.kind = r.kind;
      if (r.kind == SP_KIND_SPAN && (r.flags & SP_SPAN_HAS_CPU)) {
        row.has_cpu = CpuMeasured::kYes;
        row.cpu_ns = r.cpu_ns;
        row.delay_ns = r.delay_ns;
      }
      t.batch.Add(row);
      ++spans_;
      live_.records.store(spans_, std::memory_order_relaxed);
      if (row.name == wait_name_ && r.kind == SP_KIND_SPAN) {
        live_.iterations.fetch_add(1, std::memory_order_relaxed);
        live_.AddWait(t.pid, r.start_ns + r.duration_ns, r.duration_ns);
      }
      if (t.batch.size() >= kMaxBatchSpans) Flush(t);
      break;
    }
    case SP_KIND_CONFIG_U64:
    case SP_KIND_CONFIG_F64:
    case SP_KIND_CONFIG_STR: {
      pb::Chunk c;
      auto* cfg = c.mutable_config();
      cfg->set_pid(static_cast<uint32_t>(t.pid));
      cfg->set_scope(r.scope);
      cfg->set_key(NameOf(t, r.name));
      if (r.kind == SP_KIND_CONFIG_U64) {
        cfg->set_u64(r.arg);
      } else if (r.kind == SP_KIND_CONFIG_F64) {
        double v = 0;
        std::memcpy(&v, &r.arg, sizeof(v));
        cfg->set_f64(v);
      } else {
        // The value is a per-lane name the consumer already validated.
        if (r.arg < t.texts.size()) cfg->set_str(ValidUtf8(t.texts[r.arg]));
      }
      // Configs reference the thread's process, not its spans: keep ordering
      // simple by writing the thread's pending spans first.
      Flush(t);
      sink_.Write(c);
      break;
    }
    default: break;  // the consumer only passes the kinds above
  }
}

void Drainer::OnLaneReleased(const ring::LaneOwner& owner, uint64_t dropped) {
  auto it = threads_.find({owner.lane, owner.generation});
  if (it == threads_.end()) {
    if (dropped == 0) return;
    OnLaneOwner(owner);
    it = threads_.find({owner.lane, owner.generation});
  }
  ThreadState& t = it->second;
  Flush(t);
  if (dropped > 0) {
    pb::Chunk c;
    c.mutable_drops()->set_thread_id(t.thread_id);
    c.mutable_drops()->set_dropped(dropped);
    sink_.Write(c);
  }
  threads_.erase(it);
}

void Drainer::Flush(ThreadState& t) {
  if (t.batch.empty()) return;
  encoded_.clear();
  const uint64_t events = t.batch.size();
  t.batch.TakeEncoded(encoded_);
  sink_.WriteEncoded(encoded_, events);
}

void Drainer::FlushAll() {
  for (auto& [key, t] : threads_) Flush(t);
}

}  // namespace stallprof::collect
