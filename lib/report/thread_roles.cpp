#include "thread_roles.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string_view>

namespace stallprof::report {

void ThreadRoles::Strings(const Trace& trace) {
  const size_t first = kind_of_name_.size();
  kind_of_name_.resize(trace.strings.size(), Kind::kOther);
  for (size_t id = first; id < trace.strings.size(); ++id) {
    const std::string_view s = trace.strings[id];
    kind_of_name_[id] = s == names::kWait          ? Kind::kWait
                        : s == names::kFetch       ? Kind::kFetch
                        : s == names::kPin         ? Kind::kPin
                        : s == names::kWorkerStart ? Kind::kWorkerStart
                                                   : Kind::kOther;
  }
}

void ThreadRoles::Note(uint32_t thread, Kind kind, uint16_t scope, uint64_t arg) {
  if (thread >= seen_.size()) seen_.resize(thread + 1);
  Seen& s = seen_[thread];
  switch (kind) {
    case Kind::kWait:
      if (std::find(s.waits.begin(), s.waits.end(), scope) == s.waits.end()) s.waits.push_back(scope);
      break;
    case Kind::kFetch:
      if (!s.fetches) s.fetch_scope = scope;
      s.fetches = true;
      break;
    case Kind::kPin:
      if (!s.pins) s.pin_scope = scope;
      s.pins = true;
      break;
    case Kind::kWorkerStart:
      s.worker_id = static_cast<int64_t>(arg);
      if (!s.fetches) s.fetch_scope = scope;
      break;
    case Kind::kOther: break;
  }
}

namespace {

// The loader `scope` of `pid`: its "name" config in that process or the
// nearest ancestor that has one (workers are children of the main process);
// its id when it has no name.
std::string LoaderName(const Trace& trace, uint32_t pid, uint16_t scope) {
  uint32_t current = pid;
  for (int depth = 0; depth < 16 && current != 0; ++depth) {
    for (const auto& c : trace.configs)
      if (c.pid == current && c.scope == scope && c.key == "name" && c.type == ConfigValue::Type::kStr && !c.str.empty()) return c.str;
    const ProcessInfo* process = trace.FindProcess(current);
    if (!process || process->ppid == current) break;
    current = process->ppid;
  }
  return std::to_string(scope);
}

}  // namespace

std::vector<std::string> ThreadRoles::Labels(const Trace& trace) const {
  std::vector<std::string> labels(trace.threads.size());
  // Workers without a worker_start instant (older traces) are numbered in
  // the order their threads appeared, per loader.
  std::map<std::pair<std::string, uint16_t>, int64_t> next_worker;
  for (size_t t = 0; t < trace.threads.size(); ++t) {
    const ThreadInfo& info = trace.threads[t];
    const Seen none;
    const Seen& s = t < seen_.size() ? seen_[t] : none;
    std::string& label = labels[t];
    if (!s.waits.empty()) {
      std::string loaders;
      for (uint16_t scope : s.waits) loaders += (loaders.empty() ? "" : ", ") + LoaderName(trace, info.pid, scope);
      // Off the process's main thread: a prefetch thread, or a loop on a thread of its own.
      label = fmt::format("{} ({} {})", info.IsMain() ? "main" : fmt::format("thread {} iterating", info.tid),
                          s.waits.size() > 1 ? "loaders" : "loader", loaders);
    } else if (s.fetches || s.worker_id >= 0) {
      const std::string loader = LoaderName(trace, info.pid, s.fetch_scope);
      int64_t& next = next_worker[{loader, s.fetch_scope}];
      const int64_t id = s.worker_id >= 0 ? s.worker_id : next;
      next = std::max(next, id + 1);
      label = fmt::format("worker {} of loader {}", id, loader);
    } else if (s.pins) {
      label = fmt::format("pin-memory (loader {})", LoaderName(trace, info.pid, s.pin_scope));
    } else {
      label = info.name.empty() ? fmt::format("thread {}", info.tid) : info.name;
    }
  }
  return labels;
}

}  // namespace stallprof::report
