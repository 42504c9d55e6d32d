#include "trace.h"

#include <algorithm>
#include <unordered_map>

#include "stage_place.h"

namespace stallprof {

std::optional<uint32_t> Trace::FindString(const std::string& text) const {
  for (uint32_t i = 0; i < strings.size(); ++i)
    if (strings[i] == text) return i;
  return std::nullopt;
}

const ProcessInfo* Trace::FindProcess(uint32_t pid) const {
  for (const auto& p : processes)
    if (p.pid == pid) return &p;
  return nullptr;
}

namespace {

// Subtracts `amount` from `column` from the first sample after `after_ns`
// whose rise over the one before is at least `amount`.
void TakeOutAt(std::vector<uint64_t>& column, const std::vector<uint64_t>& t_ns, uint64_t after_ns, uint64_t amount) {
  if (amount == 0 || column.size() != t_ns.size()) return;
  size_t i = static_cast<size_t>(std::upper_bound(t_ns.begin(), t_ns.end(), after_ns) - t_ns.begin());
  for (const size_t end = std::min(column.size(), i + kReapLookahead); i < end; ++i) {
    if (i == 0 || column[i] < column[i - 1] || column[i] - column[i - 1] < amount) continue;
    for (size_t j = i; j < column.size(); ++j) column[j] -= std::min(column[j], amount);
    return;
  }
}

}  // namespace

void TakeOutReapedChildren(Trace& trace) {
  std::unordered_map<uint32_t, size_t> series_of;
  for (size_t i = 0; i < trace.process_series.size(); ++i) series_of[trace.process_series[i].pid] = i;
  struct Reaped {
    size_t parent;
    uint64_t last_ns, read_bytes, rchar;
  };
  // The children's raw totals first: a grandchild's reads are in its
  // parent's total, and the kernel passes them on to the grandparent too.
  std::vector<Reaped> reaped;
  for (const auto& p : trace.processes) {
    const auto child = series_of.find(p.pid), parent = series_of.find(p.ppid);
    if (child == series_of.end() || parent == series_of.end() || p.ppid == p.pid) continue;
    const ProcessSeries& c = trace.process_series[child->second];
    const ProcessSeries& q = trace.process_series[parent->second];
    // Still sampled when its parent's series ended: not reaped while traced.
    if (c.t_ns.empty() || q.t_ns.empty() || c.t_ns.back() >= q.t_ns.back()) continue;
    reaped.push_back({parent->second, c.t_ns.back(), c.read_bytes.size() == c.t_ns.size() ? c.read_bytes.back() : 0,
                      c.rchar.size() == c.t_ns.size() ? c.rchar.back() : 0});
  }
  std::sort(reaped.begin(), reaped.end(), [](const Reaped& a, const Reaped& b) { return a.last_ns < b.last_ns; });
  for (const auto& r : reaped) {
    ProcessSeries& q = trace.process_series[r.parent];
    TakeOutAt(q.read_bytes, q.t_ns, r.last_ns, r.read_bytes);
    TakeOutAt(q.rchar, q.t_ns, r.last_ns, r.rchar);
  }
}

bool IsUserStageName(const std::string& name) {
  return name.rfind("dataloader.", 0) != 0 && name.rfind("stallprof.", 0) != 0 && !name.empty();
}

}  // namespace stallprof
