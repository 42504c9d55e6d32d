// What each thread of a trace does in the input pipeline, told from the spans
// it recorded (the hook's contract, lib/trace/trace.h): the thread that waits
// in next() is a loader's main loop, a thread that fetches batches for a
// loader in another process is one of its workers (numbered by its
// worker_start instant), a thread that pins batches is a loader's pin-memory
// thread. The timeline export names threads by these roles instead of by
// their command ("python3").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trace/trace.h"

namespace stallprof::report {

class ThreadRoles {
 public:
  // Call whenever the trace's string table grew (the role names get their ids).
  void Strings(const Trace& trace);
  // Notes one span, instant or counter of thread `thread` (index into trace.threads).
  void Observe(uint32_t thread, uint32_t name, uint16_t scope, uint64_t arg) {
    if (name >= kind_of_name_.size() || kind_of_name_[name] == Kind::kOther) return;
    Note(thread, kind_of_name_[name], scope, arg);
  }
  // One label per thread of `trace`: "main (loader train)", "worker 3 of loader
  // train", "pin-memory (loader train)", else the thread's own name, else
  // "thread <tid>". Loaders are named by their "name" config, looked up in the
  // thread's process and then its ancestors (its id when none: "worker 0 of loader 1").
  std::vector<std::string> Labels(const Trace& trace) const;

 private:
  enum class Kind : uint8_t { kOther, kWait, kFetch, kPin, kWorkerStart };
  struct Seen {
    std::vector<uint16_t> waits;   // scopes this thread waited on, in first-seen order
    uint16_t fetch_scope = 0;      // first scope it fetched for
    uint16_t pin_scope = 0;        // first scope it pinned for
    bool fetches = false, pins = false;
    int64_t worker_id = -1;        // from its worker_start instant
  };
  void Note(uint32_t thread, Kind kind, uint16_t scope, uint64_t arg);

  std::vector<Kind> kind_of_name_;
  std::vector<Seen> seen_;
};

}  // namespace stallprof::report
