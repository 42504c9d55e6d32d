#include "sampler.h"

#include <algorithm>

#include "procfs.h"

namespace stallprof::collect {

// Buffered rows are written about this often: small chunks, little loss on a crash.
constexpr uint64_t kFlushEveryNs = 1'000'000'000ull;
constexpr uint64_t kScanEveryNs = 1'000'000'000ull;

void Sampler::Tick(uint64_t now_ns) {
  if (last_scan_ns_ == 0 || now_ns - last_scan_ns_ >= kScanEveryNs) {
    known_ = procfs::Descendants(root_);
    last_scan_ns_ = now_ns;
  }
  // Processes that reached the ring since (a DataLoader worker as it starts).
  for (pid_t pid : sink_.TakeNewOnRing())
    if (std::find(known_.begin(), known_.end(), pid) == known_.end()) known_.push_back(pid);
  std::vector<pid_t> alive;
  alive.reserve(known_.size());
  for (pid_t pid : known_) {
    auto st = procfs::ReadStat(pid, files_);
    if (!st) continue;  // exited since the scan
    alive.push_back(pid);
    sink_.NoteProcess(pid, now_ns, TraceSink::Seen::kBySampler);
    auto io = procfs::ReadIo(pid, files_).value_or(procfs::ProcIo{});
    auto& p = processes_[pid];
    p.set_pid(static_cast<uint32_t>(pid));
    p.add_t_ns(now_ns);
    p.add_cpu_ns(st->cpu_ns);
    p.add_read_bytes(io.read_bytes);
    p.add_rchar(io.rchar);
    p.add_rss_bytes(st->rss_bytes);
    const auto threads = procfs::ReadThreadTimes(pid, files_);
    p.add_delay_ns(threads.delay_ns);
    p.add_main_thread_cpu_ns(threads.main_cpu_ns);
    p.add_main_thread_delay_ns(threads.main_delay_ns);
    p.add_threads(st->threads);
    p.add_minor_faults(st->minor_faults);
    p.add_system_cpu_ns(st->system_cpu_ns);
  }
  known_.swap(alive);
  const auto sys = procfs::ReadSystem(files_);
  system_.add_t_ns(now_ns);
  system_.add_cpu_busy_ns(sys.cpu_busy_ns);
  system_.add_cpu_total_ns(sys.cpu_total_ns);
  system_.add_cpu_steal_ns(sys.cpu_steal_ns);
  system_.add_page_cache_bytes(sys.page_cache_bytes);
  system_.add_disk_read_bytes(sys.disk_read_bytes);
  system_.add_mem_available_bytes(sys.mem_available_bytes);
  files_.Sweep();
  if (last_flush_ns_ == 0) last_flush_ns_ = now_ns;
  if (now_ns - last_flush_ns_ >= kFlushEveryNs) {
    Flush();
    last_flush_ns_ = now_ns;
  }
}

void Sampler::Flush() {
  pb::Chunk c;
  for (auto& [pid, rows] : processes_) {
    if (rows.t_ns_size() == 0) continue;
    c.mutable_process_samples()->Swap(&rows);
    sink_.Write(c);
  }
  processes_.clear();
  if (system_.t_ns_size() > 0) {
    c.mutable_system_samples()->Swap(&system_);
    sink_.Write(c);
    system_.Clear();
  }
}

}  // namespace stallprof::collect
